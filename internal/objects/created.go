package objects

import "encoding/json"

// Ref is an object an upstream answer created or handed out.
type Ref struct {
	ID   string
	Kind string
}

// kinds maps an answer's "object" field to the kind Corral records. An
// answer of another type creates nothing Corral tracks.
var kinds = map[string]string{
	"file":            "file",
	"upload":          "upload",
	"batch":           "batch",
	"response":        "response",
	"chat.completion": "chat_completion",
	"conversation":    "conversation",
	"vector_store":    "vector_store",
	"assistant":       "assistant",
	"thread":          "thread",
	"fine_tuning.job": "fine_tuning_job",
	"container":       "container",
	"eval":            "eval",
	"video":           "video",
	"chatkit.session": "chatkit_session",
	"chatkit.thread":  "chatkit_thread",
	// Anthropic's objects name their kind in "type", not "object"
	// (decodeAnswer).
	"message_batch":  "message_batch",
	"anthropic.file": "anthropic_file",
}

// anthropicTypes maps the "type" of an Anthropic answer that has no
// "object" to the name kinds knows it by.
var anthropicTypes = map[string]string{"message_batch": "message_batch", "file": "anthropic.file"}

// answer is the part of an upstream object Created reads.
type answer struct {
	Object string `json:"object"`
	Type   string `json:"type"` // Anthropic's objects: "message_batch", "file"
	ID     string `json:"id"`
	// An upload's complete step returns the file it made.
	File *struct {
		ID string `json:"id"`
	} `json:"file"`
	// A batch's results and a fine-tuning job's are files the upstream
	// creates for the owner of the batch or job.
	OutputFileID string   `json:"output_file_id"`
	ErrorFileID  string   `json:"error_file_id"`
	ResultFiles  []string `json:"result_files"`
	// A fine-tuning job that succeeded names the model it made.
	FineTunedModel string `json:"fine_tuned_model"`
	// A thread run made with POST /threads/runs carries its new thread.
	ThreadID string `json:"thread_id"`
	// A response's output items can be referenced later (item_reference),
	// and a code interpreter call names the container it made.
	Output []struct {
		ID          string `json:"id"`
		ContainerID string `json:"container_id"`
	} `json:"output"`
}

// Created returns the objects an upstream answer hands its caller. With
// create set (the answer to a create), the answer's own id counts; on any
// answer, the objects the upstream made on the owner's behalf count (a
// batch's output file, a job's result files, an upload's file, a run's
// thread, a response's items and containers). Non-JSON answers and answers
// of other types yield nothing.
func Created(body []byte, create bool) []Ref {
	a, ok := decodeAnswer(body)
	if !ok {
		return nil
	}
	return a.refs(create)
}

// decodeAnswer reads an upstream answer; Anthropic's objects name their
// kind in "type" where OpenAI's use "object".
func decodeAnswer(body []byte) (answer, bool) {
	var a answer
	if json.Unmarshal(body, &a) != nil {
		return a, false
	}
	if a.Object == "" {
		a.Object = anthropicTypes[a.Type]
	}
	return a, true
}

// CreatedAs is Created for an answer on a path of one kind of object: an
// answer that is not that kind's object (a thread run on /threads) yields
// nothing. Content a tenant stored (a file's bytes, a container file
// served as JSON) can look like any answer; only the answer a path
// returns describes objects the upstream made.
func CreatedAs(body []byte, create bool, kind string) []Ref {
	a, ok := decodeAnswer(body)
	if !ok {
		return nil
	}
	if kinds[a.Object] != kind && !(a.Object == "thread.run" && kind == "thread") {
		return nil
	}
	return a.refs(create)
}

func (a *answer) refs(create bool) []Ref {
	kind, ok := kinds[a.Object]
	if a.Object == "thread.run" && a.ThreadID != "" && create {
		return []Ref{{ID: a.ThreadID, Kind: "thread"}}
	}
	if !ok {
		return nil
	}
	var out []Ref
	add := func(id, kind string) {
		if id != "" && len(id) <= MaxIDLen {
			out = append(out, Ref{ID: id, Kind: kind})
		}
	}
	if create {
		add(a.ID, kind)
	}
	switch a.Object {
	case "upload":
		if a.File != nil {
			add(a.File.ID, "file")
		}
	case "batch":
		add(a.OutputFileID, "file")
		add(a.ErrorFileID, "file")
	case "fine_tuning.job":
		for _, f := range a.ResultFiles {
			add(f, "file")
		}
		if IsFineTuned(a.FineTunedModel) {
			add(a.FineTunedModel, "model")
		}
	case "response":
		if create {
			for _, o := range a.Output {
				add(o.ID, "item")
				add(o.ContainerID, "container")
			}
		}
	}
	return out
}

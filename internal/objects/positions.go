package objects

import "strings"

// A JSON body names stored objects only where its endpoint's schema puts
// them (OpenAI's and Anthropic's OpenAPI specifications): Responses'
// previous_response_id, a Messages content block's source.file_id, a
// batch's input_file_id, and so on. Everything else in a body belongs to
// the caller or the model: metadata and client_metadata, tool
// definitions, tool inputs and arguments (tool_use.input,
// function_call.arguments, a tool_result's text) and prompt text may hold
// strings that look like ids ("file_id", "thread_id") of the caller's own
// systems, and are never read as references.
//
// Keys are matched as case-insensitive decoders match them (foldKey), and
// a duplicated key names every one of its values.

// schema reads one endpoint's body.
type schema struct {
	read func(*reader, *node)
	// models is set when the endpoint names models below the top level
	// (a batch's requests, a realtime session, a grader): the body is
	// always read, since a model needs no reference-like key.
	models bool
}

// endpoint is one path pattern below /v1 ("*" is one id segment).
type endpoint struct {
	pattern string
	schema  schema
}

// endpoints are the paths whose bodies Corral reads by their schema. A
// path not listed (a new upstream API) keeps the generic reading: every
// reference-like field at any depth outside metadata, which fails closed.
var endpoints = []endpoint{
	{"/responses", schema{read: readResponses}},
	{"/responses/input_tokens", schema{read: readResponses}},
	{"/responses/compact", schema{read: readResponses}},
	{"/responses/*", schema{read: readNothing}},
	{"/responses/*/cancel", schema{read: readNothing}},
	{"/chat/completions", schema{read: readChat}},
	{"/chat/completions/*", schema{read: readNothing}},
	{"/completions", schema{read: readNothing}},
	{"/embeddings", schema{read: readNothing}},
	{"/moderations", schema{read: readNothing}},
	{"/messages", schema{read: readMessages}},
	{"/messages/count_tokens", schema{read: readMessages}},
	{"/messages/batches", schema{read: readMessageBatches, models: true}},
	{"/batches", schema{read: readBatches}},
	{"/batches/*/cancel", schema{read: readNothing}},
	{"/files", schema{read: readNothing}},
	{"/uploads", schema{read: readNothing}},
	{"/uploads/*/complete", schema{read: readNothing}},
	{"/uploads/*/cancel", schema{read: readNothing}},
	{"/fine_tuning/jobs", schema{read: readFineTuningJobs, models: true}},
	{"/fine_tuning/jobs/*/cancel", schema{read: readNothing}},
	{"/fine_tuning/alpha/graders/run", schema{read: readGraderRun, models: true}},
	{"/fine_tuning/alpha/graders/validate", schema{read: readGraderRun, models: true}},
	{"/vector_stores", schema{read: readVectorStores}},
	{"/vector_stores/*", schema{read: readNothing}},
	{"/vector_stores/*/search", schema{read: readNothing}},
	{"/vector_stores/*/files", schema{read: readVectorStoreFiles}},
	{"/vector_stores/*/files/*", schema{read: readNothing}},
	{"/vector_stores/*/file_batches", schema{read: readVectorStoreFiles}},
	{"/assistants", schema{read: readAssistants}},
	{"/assistants/*", schema{read: readAssistants}},
	{"/threads", schema{read: readThreads}},
	{"/threads/runs", schema{read: readThreadAndRun}},
	{"/threads/*", schema{read: readAssistants}},
	{"/threads/*/messages", schema{read: readThreadMessage}},
	{"/threads/*/messages/*", schema{read: readNothing}},
	{"/threads/*/runs", schema{read: readRun}},
	{"/threads/*/runs/*", schema{read: readNothing}},
	{"/threads/*/runs/*/submit_tool_outputs", schema{read: readNothing}},
	{"/threads/*/runs/*/cancel", schema{read: readNothing}},
	{"/evals", schema{read: readEvals, models: true}},
	{"/evals/*", schema{read: readNothing}},
	{"/evals/*/runs", schema{read: readEvalRuns, models: true}},
	{"/containers", schema{read: readContainers}},
	{"/containers/*/files", schema{read: readContainerFiles}},
	{"/conversations", schema{read: readConversationItems}},
	{"/conversations/*", schema{read: readNothing}},
	{"/conversations/*/items", schema{read: readConversationItems}},
	{"/realtime/client_secrets", schema{read: readRealtimeClientSecret, models: true}},
	{"/realtime/sessions", schema{read: readRealtimeSession, models: true}},
	{"/realtime/transcription_sessions", schema{read: readRealtimeSession, models: true}},
}

// generic is the reading of a path no schema covers.
var generic = schema{read: readAnyDepth}

// schemaFor returns the schema of a path below /v1 (the method does not
// change where a body names objects: a body sent with another method is
// read the same way). Segments match in any letter case, as Route's do.
func schemaFor(path string) schema {
	path = strings.TrimSuffix(path, "/")
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for _, e := range endpoints {
		if matchPattern(e.pattern, segs) {
			return e.schema
		}
	}
	return generic
}

func matchPattern(pattern string, segs []string) bool {
	ps := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	if len(ps) != len(segs) {
		return false
	}
	for i, p := range ps {
		if p == "*" {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if !strings.EqualFold(p, segs[i]) {
			return false
		}
	}
	return true
}

// reader collects what one body names.
type reader struct {
	ids    []string
	models []string
	query  string
	err    error
}

func (r *reader) id(s string) {
	if s == "" || r.err != nil {
		return
	}
	if r.ids = append(r.ids, s); len(r.ids) > MaxRefs {
		r.err = ErrTooMany
	}
}

// strs names the string values of n's member key and the strings of its
// array values.
func (r *reader) strs(n *node, key string) {
	for _, v := range n.all(key) {
		switch v.kind {
		case kindString:
			r.id(v.str)
		case kindArray:
			for _, e := range v.elems {
				if e.kind == kindString {
					r.id(e.str)
				}
			}
		}
	}
}

// idOrObject names key's string values and the "id" of its object values
// ("conversation": "conv_1" or {"id": "conv_1"}).
func (r *reader) idOrObject(n *node, key string) {
	for _, v := range n.all(key) {
		switch v.kind {
		case kindString:
			r.id(v.str)
		case kindObject:
			r.strs(v, "id")
		}
	}
}

// model notes the models n's member key names; a fine-tuned one is also
// a reference (its job owner's).
func (r *reader) model(n *node, key string) {
	for _, m := range n.strings(key) {
		if m == "" {
			continue // the upstream refuses an empty model
		}
		if len(r.models) < MaxRefs {
			r.models = append(r.models, m)
		}
		if IsFineTuned(m) {
			r.id(m)
		}
	}
}

func readNothing(*reader, *node) {}

// readResponses: a Responses body (also input_tokens and compact).
func readResponses(r *reader, n *node) {
	r.strs(n, "previous_response_id")
	r.idOrObject(n, "conversation")
	n.each("input", r.responseItem)
	n.each("tools", r.responseTool)
}

// responseItem: one Responses input item (also a conversation's item):
// an item_reference's id, the file_id of its content parts (input_file,
// input_image) and of a tool call output's parts (a function call output
// given as parts, a computer call's screenshot). A content part sent
// where an item is expected is read as a part.
func (r *reader) responseItem(it *node) {
	if it.is("item_reference") {
		r.strs(it, "id")
	}
	r.strs(it, "file_id")
	it.each("content", r.filePart)
	it.each("output", r.filePart)
}

func (r *reader) filePart(p *node) { r.strs(p, "file_id") }

// responseTool: a file_search tool's vector stores, a code interpreter's
// container (an id, or an automatic one with its files) and an image
// generation tool's mask file. Function definitions are the caller's.
func (r *reader) responseTool(t *node) {
	r.strs(t, "vector_store_ids")
	for _, c := range t.all("container") {
		switch c.kind {
		case kindString:
			r.id(c.str)
		case kindObject:
			r.strs(c, "file_ids")
		}
	}
	for _, m := range t.all("input_image_mask") {
		r.strs(m, "file_id")
	}
}

// readChat: a chat message's file content part, {"type": "file",
// "file": {"file_id": ...}}.
func readChat(r *reader, n *node) {
	n.each("messages", func(m *node) {
		m.each("content", func(p *node) {
			for _, f := range p.all("file") {
				r.strs(f, "file_id")
			}
		})
	})
}

// readMessages: an Anthropic Messages body (also count_tokens): the
// top-level container (an id, or {"id": ...}), a content block's
// source.file_id (image and document blocks with a "file" source), a
// container_upload block's file_id, and the same sources in the blocks
// of a tool_result's content. A tool_use's input is the model's and the
// client's, and a tool_result's text is only text.
func readMessages(r *reader, n *node) {
	r.idOrObject(n, "container")
	n.each("messages", func(m *node) {
		m.each("content", func(b *node) {
			r.block(b)
			if b.is("tool_result") {
				b.each("content", r.block)
			}
		})
	})
}

func (r *reader) block(b *node) {
	if b.is("tool_use") || b.is("server_tool_use") || b.is("tool_result") {
		return // their input and their content's text are not the upstream's objects
	}
	r.strs(b, "file_id")
	for _, s := range b.all("source") {
		r.strs(s, "file_id")
	}
}

// readMessageBatches: every request's params is a Messages body, and its
// model is checked as a top-level one is.
func readMessageBatches(r *reader, n *node) {
	n.each("requests", func(q *node) {
		for _, p := range q.all("params") {
			readMessages(r, p)
			r.model(p, "model")
		}
	})
}

func readBatches(r *reader, n *node) { r.strs(n, "input_file_id") }

// readFineTuningJobs: the job's files, and the models of a reinforcement
// method's grader.
func readFineTuningJobs(r *reader, n *node) {
	r.strs(n, "training_file")
	r.strs(n, "validation_file")
	for _, m := range n.all("method") {
		for _, rf := range m.all("reinforcement") {
			for _, g := range rf.all("grader") {
				r.grader(g)
			}
		}
	}
}

func readGraderRun(r *reader, n *node) {
	for _, g := range n.all("grader") {
		r.grader(g)
	}
}

// grader notes the model a grader runs (score_model, label_model) and
// those of a multi grader's graders, a map of name to grader.
func (r *reader) grader(g *node) {
	r.model(g, "model")
	for _, gs := range g.all("graders") {
		switch gs.kind {
		case kindObject:
			for _, m := range gs.members {
				r.grader(m.val)
			}
		case kindArray:
			for _, e := range gs.elems {
				r.grader(e)
			}
		}
	}
}

func readVectorStores(r *reader, n *node) { r.strs(n, "file_ids") }

// readVectorStoreFiles: a vector store's file (file_id) or file batch
// (file_ids, or files with their own file_id).
func readVectorStoreFiles(r *reader, n *node) {
	r.strs(n, "file_id")
	r.strs(n, "file_ids")
	n.each("files", r.filePart)
}

// readAssistants: an assistant's or a thread's tool resources.
func readAssistants(r *reader, n *node) { r.toolResources(n) }

func (r *reader) toolResources(n *node) {
	for _, tr := range n.all("tool_resources") {
		for _, ci := range tr.all("code_interpreter") {
			r.strs(ci, "file_ids")
		}
		for _, fs := range tr.all("file_search") {
			r.strs(fs, "vector_store_ids")
			fs.each("vector_stores", func(v *node) { r.strs(v, "file_ids") })
		}
	}
}

// threadMessage: an Assistants message's image_file parts and attachments.
func (r *reader) threadMessage(m *node) {
	m.each("content", func(p *node) {
		for _, f := range p.all("image_file") {
			r.strs(f, "file_id")
		}
	})
	m.each("attachments", r.filePart)
}

func readThreadMessage(r *reader, n *node) { r.threadMessage(n) }

func readThreads(r *reader, n *node) {
	n.each("messages", r.threadMessage)
	r.toolResources(n)
}

// readThreadAndRun: POST /threads/runs names its assistant, and its new
// thread's messages and resources.
func readThreadAndRun(r *reader, n *node) {
	r.strs(n, "assistant_id")
	for _, th := range n.all("thread") {
		readThreads(r, th)
	}
	r.toolResources(n)
}

func readRun(r *reader, n *node) {
	r.strs(n, "assistant_id")
	n.each("additional_messages", r.threadMessage)
	r.toolResources(n)
}

// readEvals: an eval's data source config over stored objects (a query,
// refused) and the models its testing criteria run.
func readEvals(r *reader, n *node) {
	for _, c := range n.all("data_source_config") {
		if c.is("stored_completions") || c.is("logs") {
			r.query = firstOf(c.strings("type"))
		}
	}
	n.each("testing_criteria", r.grader)
}

// readEvalRuns: a run's data source names its file ({"type": "file_id",
// "id": ...}) or selects stored objects (a query, refused), and names
// the model it samples.
func readEvalRuns(r *reader, n *node) {
	for _, ds := range n.all("data_source") {
		for _, s := range ds.all("source") {
			if s.is("file_id") {
				r.strs(s, "id")
			}
			if s.is("stored_completions") || s.is("responses") {
				r.query = firstOf(s.strings("type"))
			}
		}
		r.model(ds, "model")
	}
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func readContainers(r *reader, n *node) { r.strs(n, "file_ids") }

func readContainerFiles(r *reader, n *node) { r.strs(n, "file_id") }

func readConversationItems(r *reader, n *node) { n.each("items", r.responseItem) }

// readRealtimeClientSecret: a client secret is minted for its session's
// model (and transcription model), usable against the upstream directly.
func readRealtimeClientSecret(r *reader, n *node) {
	for _, s := range n.all("session") {
		readRealtimeSession(r, s)
	}
}

func readRealtimeSession(r *reader, s *node) {
	r.model(s, "model")
	for _, t := range s.all("input_audio_transcription") {
		r.model(t, "model")
	}
	for _, a := range s.all("audio") {
		for _, in := range a.all("input") {
			for _, t := range in.all("transcription") {
				r.model(t, "model")
			}
		}
	}
}

// refFields are the keys (folded) whose values the generic reading takes
// as references at any depth: a string, an array of strings, or an object
// with an "id".
var refFields = map[string]bool{
	"previous_response_id": true,
	"response_id":          true,
	"input_file_id":        true,
	"file_id":              true,
	"file_ids":             true,
	"training_file":        true,
	"validation_file":      true,
	"conversation":         true,
	"conversation_id":      true,
	"vector_store_id":      true,
	"vector_store_ids":     true,
	"assistant_id":         true,
	"thread_id":            true,
	"container":            true,
	"container_id":         true,
}

// querySources are the object types, by the key they are the value of,
// that make an upstream read stored objects by filter, for the generic
// reading.
var querySources = map[string]map[string]bool{
	"source":             {"stored_completions": true, "responses": true},
	"data_source_config": {"stored_completions": true, "logs": true},
}

// readAnyDepth is the generic reading of a path no schema covers: every
// reference field at any depth outside metadata and client_metadata, the
// id of an item_reference or file_id object, and stored-object queries.
func readAnyDepth(r *reader, n *node) { r.anyDepth(n, "") }

func (r *reader) anyDepth(n *node, field string) {
	switch n.kind {
	case kindString:
		if field != "" {
			r.id(n.str)
		}
	case kindArray:
		for _, e := range n.elems {
			r.anyDepth(e, field)
		}
	case kindObject:
		if field != "" || n.is("item_reference") || n.is("file_id") {
			r.strs(n, "id")
		}
		for _, m := range n.members {
			if m.key == "metadata" || m.key == "client_metadata" {
				continue
			}
			if q := querySources[m.key]; q != nil && m.val.kind == kindObject {
				for _, typ := range m.val.strings("type") {
					if q[typ] {
						r.query = typ
					}
				}
			}
			f := ""
			if refFields[m.key] {
				f = m.key
			}
			r.anyDepth(m.val, f)
		}
	}
}

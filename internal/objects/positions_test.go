package objects

import (
	"slices"
	"testing"
)

// lookAlikes are strings every endpoint's table checks are never read as
// references: the caller's metadata, a client's own metadata (Codex sends
// its session as client_metadata.thread_id), tool definitions, tool
// inputs and arguments, tool results' text and prompt text.
const (
	lookMetadata       = `"metadata":{"file_id":"file-meta","thread_id":"thread-meta"}`
	lookClientMetadata = `"client_metadata":{"thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53","file_id":"file-cm"}`
	lookFunctionTool   = `{"type":"function","name":"drive","parameters":{"type":"object","properties":{"file_id":{"type":"string"},"thread_id":{"type":"string"}}}}`
)

// TestRefsPositionsPerEndpoint: on each endpoint, the positions its schema
// gives are references, and look-alikes elsewhere in the body are not.
func TestRefsPositionsPerEndpoint(t *testing.T) {
	tests := []struct {
		name, path, body string
		want             []string
		models           []string
	}{
		// Responses.
		{"responses: every position", "/responses", `{"model":"m","previous_response_id":"resp_1","conversation":"conv_1",
			"input":[{"type":"item_reference","id":"msg_1"},
				{"role":"user","content":[{"type":"input_text","text":"see file-abc"},{"type":"input_file","file_id":"file-1"},{"type":"input_image","file_id":"file-2"}]},
				{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_id":"file-3"}]},
				{"type":"computer_call_output","call_id":"c2","output":{"type":"computer_screenshot","file_id":"file-4"}}],
			"tools":[{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"code_interpreter","container":"cntr_1"},
				{"type":"code_interpreter","container":{"type":"auto","file_ids":["file-5"]}},{"type":"image_generation","input_image_mask":{"file_id":"file-6"}}]}`,
			[]string{"resp_1", "conv_1", "msg_1", "file-1", "file-2", "file-3", "file-4", "vs_1", "cntr_1", "file-5", "file-6"}, nil},
		{"responses: conversation object", "/responses", `{"conversation":{"id":"conv_2"}}`, []string{"conv_2"}, nil},
		{"responses: look-alikes", "/responses", `{"model":"m",` + lookMetadata + `,` + lookClientMetadata + `,
			"prompt_cache_key":"thread_id","input":[{"role":"user","content":"the file_id is file-abc, thread_id thread_abc"},
				{"type":"function_call","call_id":"c","name":"drive","arguments":"{\"file_id\":\"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms\",\"thread_id\":\"t\"}"},
				{"type":"function_call_output","call_id":"c","output":"{\"file_id\":\"file-out\"}"}],
			"tools":[` + lookFunctionTool + `]}`, nil, nil},
		{"responses: input_tokens", "/responses/input_tokens", `{"previous_response_id":"resp_3",` + lookClientMetadata + `}`, []string{"resp_3"}, nil},
		// Chat completions.
		{"chat: file part", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-7"}}]}]}`, []string{"file-7"}, nil},
		{"chat: look-alikes", "/chat/completions", `{"model":"m",` + lookMetadata + `,"messages":[{"role":"user","content":"file_id: file-abc"},
			{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"drive","arguments":"{\"file_id\":\"x\"}"}}]},
			{"role":"tool","tool_call_id":"c","content":"{\"file_id\":\"y\",\"thread_id\":\"z\"}"}],
			"tools":[{"type":"function","function":{"name":"drive","parameters":{"properties":{"file_id":{"type":"string"}}}}}]}`, nil, nil},
		// Anthropic Messages (and count_tokens).
		{"messages: every position", "/messages", `{"model":"m","container":"container_1","messages":[{"role":"user","content":[
			{"type":"image","source":{"type":"file","file_id":"file_8"}},{"type":"document","source":{"type":"file","file_id":"file_9"}},
			{"type":"container_upload","file_id":"file_10"}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"file","file_id":"file_11"}}]}]}]}`,
			[]string{"container_1", "file_8", "file_9", "file_10", "file_11"}, nil},
		{"messages: container object", "/messages/count_tokens", `{"container":{"id":"container_2"}}`, []string{"container_2"}, nil},
		{"messages: look-alikes", "/messages", `{"model":"m",` + lookMetadata + `,"messages":[
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"drive","input":{"file_id":"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"}},
				{"type":"tool_use","id":"toolu_2","name":"slack","input":{"thread_id":"1700000000.123456","source":{"file_id":"f"}}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"file_id\":\"file-abc\"}"},
				{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"thread_id 1700000000.123456"}]},
				{"type":"text","text":"open file-abc"}]}],
			"tools":[{"name":"drive","input_schema":{"type":"object","properties":{"file_id":{"type":"string"}}}}]}`, nil, nil},
		{"messages count_tokens: look-alikes", "/messages/count_tokens", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{"file_id":"f","thread_id":"t"}}]}]}`, nil, nil},
		// Message Batches: each request is a Messages body.
		{"message batches", "/messages/batches", `{"requests":[{"custom_id":"file_id","params":{"model":"claude-x",` + lookMetadata + `,
			"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_12"}},
				{"type":"tool_use","id":"t","name":"x","input":{"file_id":"not-a-ref"}}]}]}}]}`,
			[]string{"file_12"}, []string{"claude-x"}},
		// Batches and fine-tuning.
		{"batches", "/batches", `{"input_file_id":"file-13","endpoint":"/v1/responses",` + lookMetadata + `}`, []string{"file-13"}, nil},
		{"fine-tuning job", "/fine_tuning/jobs", `{"model":"ft:gpt-4o-mini:org::base","training_file":"file-14","validation_file":"file-15",` + lookMetadata + `,
			"method":{"type":"reinforcement","reinforcement":{"grader":{"type":"score_model","model":"o3-mini"}}}}`,
			[]string{"ft:gpt-4o-mini:org::base", "file-14", "file-15"}, []string{"o3-mini"}},
		{"grader run", "/fine_tuning/alpha/graders/run", `{"grader":{"type":"multi","graders":{"a":{"type":"score_model","model":"ft:gpt-4o:alpha-private::1"},
			"b":{"type":"label_model","model":"gpt-4o"}}},"item":{"file_id":"not-a-ref"},"model_sample":"thread_id"}`,
			[]string{"ft:gpt-4o:alpha-private::1"}, []string{"ft:gpt-4o:alpha-private::1", "gpt-4o"}},
		// Files, uploads: their bodies name nothing (the path's id counts).
		{"uploads", "/uploads", `{"filename":"file_id.jsonl","purpose":"batch","bytes":1,"mime_type":"text/jsonl"}`, nil, nil},
		{"upload complete", "/uploads/upload_1/complete", `{"part_ids":["part_1"]}`, nil, nil},
		// Vector stores.
		{"vector store", "/vector_stores", `{"name":"v","file_ids":["file-16"],` + lookMetadata + `}`, []string{"file-16"}, nil},
		{"vector store file", "/vector_stores/vs_1/files", `{"file_id":"file-17","attributes":{"thread_id":"x"}}`, []string{"file-17"}, nil},
		{"vector store file batch", "/vector_stores/vs_1/file_batches", `{"file_ids":["file-18"],"files":[{"file_id":"file-19"}]}`, []string{"file-18", "file-19"}, nil},
		// Assistants and threads.
		{"assistant", "/assistants", `{"model":"gpt-4o",` + lookMetadata + `,"tools":[` + lookFunctionTool + `],
			"tool_resources":{"code_interpreter":{"file_ids":["file-20"]},"file_search":{"vector_store_ids":["vs_2"],"vector_stores":[{"file_ids":["file-21"]}]}}}`,
			[]string{"file-20", "vs_2", "file-21"}, nil},
		{"thread", "/threads", `{"messages":[{"role":"user","content":[{"type":"image_file","image_file":{"file_id":"file-22"}},{"type":"text","text":"thread_id x"}],
			"attachments":[{"file_id":"file-23","tools":[{"type":"file_search"}]}]}],"tool_resources":{"code_interpreter":{"file_ids":["file-24"]}}}`,
			[]string{"file-22", "file-23", "file-24"}, nil},
		{"thread and run", "/threads/runs", `{"assistant_id":"asst_1","thread":{"messages":[{"role":"user","content":"hi","attachments":[{"file_id":"file-25"}]}]},` + lookMetadata + `}`,
			[]string{"asst_1", "file-25"}, nil},
		{"run", "/threads/thread_1/runs", `{"assistant_id":"asst_2","additional_messages":[{"role":"user","content":"x","attachments":[{"file_id":"file-26"}]}],"tools":[` + lookFunctionTool + `]}`,
			[]string{"asst_2", "file-26"}, nil},
		{"thread message", "/threads/thread_1/messages", `{"role":"user","content":"file_id file-abc","attachments":[{"file_id":"file-27"}]}`, []string{"file-27"}, nil},
		{"tool outputs", "/threads/thread_1/runs/run_1/submit_tool_outputs", `{"tool_outputs":[{"tool_call_id":"c","output":"{\"file_id\":\"x\",\"thread_id\":\"y\"}"}]}`, nil, nil},
		// Evals.
		{"eval", "/evals", `{"data_source_config":{"type":"custom","item_schema":{"properties":{"file_id":{}}}},"testing_criteria":[{"type":"score_model","model":"gpt-4o-mini"}]}`,
			nil, []string{"gpt-4o-mini"}},
		{"eval run", "/evals/eval_1/runs", `{"data_source":{"type":"completions","model":"ft:gpt-4o:o::x","source":{"type":"file_id","id":"file-28"},
			"input_messages":{"type":"item_reference","item_reference":"item.input"}},` + lookMetadata + `}`,
			[]string{"ft:gpt-4o:o::x", "file-28"}, []string{"ft:gpt-4o:o::x"}},
		// Containers.
		{"container", "/containers", `{"name":"c","file_ids":["file-29"]}`, []string{"file-29"}, nil},
		{"container file", "/containers/cntr_1/files", `{"file_id":"file-30"}`, []string{"file-30"}, nil},
		// Conversations: their items are Responses input items.
		{"conversation", "/conversations", `{"items":[{"type":"message","role":"user","content":[{"type":"input_file","file_id":"file-31"}]}],` + lookMetadata + `}`, []string{"file-31"}, nil},
		{"conversation items", "/conversations/conv_1/items", `{"items":[{"type":"item_reference","id":"msg_2"},{"type":"function_call","call_id":"c","name":"n","arguments":"{\"thread_id\":\"x\"}"}]}`, []string{"msg_2"}, nil},
		// Realtime: models only.
		{"realtime client secret", "/realtime/client_secrets", `{"session":{"type":"realtime","model":"gpt-realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}}}}`,
			nil, []string{"gpt-realtime", "whisper-1"}},
		{"realtime transcription session", "/realtime/transcription_sessions", `{"input_audio_transcription":{"model":"gpt-4o-transcribe"}}`, nil, []string{"gpt-4o-transcribe"}},
		// Letter case and duplicates, as case-insensitive decoders read them.
		{"folded keys", "/responses", `{"Previous_Response_ID":"resp_4","INPUT":[{"type":"item_reference","ID":"msg_3"}]}`, []string{"resp_4", "msg_3"}, nil},
		{"duplicate keys", "/batches", `{"input_file_id":"file-mine","input_file_id":"file-theirs"}`, []string{"file-mine", "file-theirs"}, nil},
	}
	for _, tt := range tests {
		got, err := Refs(tt.path, "application/json", []byte(tt.body))
		if err != nil {
			t.Errorf("%s: Refs error %v", tt.name, err)
			continue
		}
		if !sameSet(got.IDs, tt.want) {
			t.Errorf("%s: IDs = %q; want %q", tt.name, got.IDs, tt.want)
		}
		if !sameSet(got.Models, tt.models) {
			t.Errorf("%s: Models = %q; want %q", tt.name, got.Models, tt.models)
		}
	}
}

func sameSet(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(slices.Compact(got), slices.Compact(want))
}

package objects

import "testing"

func TestRoute(t *testing.T) {
	tests := []struct {
		method, path string
		want         Access
	}{
		{"POST", "/files", Access{Op: Create, Kind: "file"}},
		{"GET", "/files", Access{Op: List, Kind: "file"}},
		{"GET", "/files/", Access{Op: List, Kind: "file"}},
		{"GET", "/files/file-abc", Access{Op: Object, Kind: "file", ID: "file-abc"}},
		{"GET", "/files/file-abc/content", Access{Op: Object, Kind: "file", ID: "file-abc"}},
		{"DELETE", "/files/file-abc", Access{Op: Object, Kind: "file", ID: "file-abc", Delete: true}},
		{"DELETE", "/files/file-abc/", Access{Op: Object, Kind: "file", ID: "file-abc", Delete: true}},
		{"POST", "/batches", Access{Op: Create, Kind: "batch"}},
		{"POST", "/batches/batch_1/cancel", Access{Op: Object, Kind: "batch", ID: "batch_1"}},
		{"POST", "/responses", Access{Op: Create, Kind: "response"}},
		{"GET", "/responses/resp_1/input_items", Access{Op: Object, Kind: "response", ID: "resp_1"}},
		{"POST", "/responses/input_tokens", Access{Op: Action, Kind: "response"}},
		{"POST", "/responses/compact", Access{Op: Action, Kind: "response"}},
		{"GET", "/chat/completions", Access{Op: List, Kind: "chat_completion"}},
		{"GET", "/chat/completions/chatcmpl-1/messages", Access{Op: Object, Kind: "chat_completion", ID: "chatcmpl-1"}},
		{"POST", "/threads/runs", Access{Op: Create, Kind: "thread"}},
		{"POST", "/threads/thread_1/runs", Access{Op: Object, Kind: "thread", ID: "thread_1"}},
		{"GET", "/fine_tuning/jobs/ftjob-1/events", Access{Op: Object, Kind: "fine_tuning_job", ID: "ftjob-1"}},
		{"POST", "/vector_stores/vs_1/files", Access{Op: Object, Kind: "vector_store", ID: "vs_1"}},
		{"POST", "/uploads/upload_1/parts", Access{Op: Object, Kind: "upload", ID: "upload_1"}},
		{"POST", "/videos/video_1/remix", Access{Op: Object, Kind: "video", ID: "video_1"}},
		{"POST", "/conversations", Access{Op: Create, Kind: "conversation"}},
		{"POST", "/containers/cntr_1/files", Access{Op: Object, Kind: "container", ID: "cntr_1"}},
		{"GET", "/evals/eval_1/runs/run_1", Access{Op: Object, Kind: "eval", ID: "eval_1"}},
		{"GET", "/assistants/asst_1", Access{Op: Object, Kind: "assistant", ID: "asst_1"}},
		{"GET", "/FILES/file-abc", Access{Op: Object, Kind: "file", ID: "file-abc"}},
		{"GET", "/Chat/Completions/X-1", Access{Op: Object, Kind: "chat_completion", ID: "X-1"}},
		{"GET", "/files/file-abc;x=1", Access{Op: Object, Kind: "file", ID: "file-abc;x=1"}},
		{"GET", "/chatkit/threads", Access{Op: List, Kind: "chatkit_thread"}},
		{"GET", "/chatkit/threads/cthr_1/items", Access{Op: Object, Kind: "chatkit_thread", ID: "cthr_1"}},
		{"POST", "/chatkit/sessions", Access{Op: Create, Kind: "chatkit_session"}},
		{"POST", "/chatkit/sessions/cksess_1/cancel", Access{Op: Object, Kind: "chatkit_session", ID: "cksess_1"}},
		{"DELETE", "/models/ft:gpt-4o-mini:org::abc", Access{Op: Object, Kind: "model", ID: "ft:gpt-4o-mini:org::abc", Delete: true}},
		{"GET", "/models", Access{Op: List, Kind: "model"}},
		{"GET", "/models/gpt-4o-mini", Access{Op: None}},
		// Not object paths: a prefix that is not a whole segment, other APIs.
		{"GET", "/filesystem", Access{Op: None}},
		{"POST", "/embeddings", Access{Op: None}},
		{"POST", "/chat/completions/", Access{Op: Create, Kind: "chat_completion"}},
	}
	for _, tt := range tests {
		if got := Route(tt.method, tt.path); got != tt.want {
			t.Errorf("Route(%s %s) = %+v; want %+v", tt.method, tt.path, got, tt.want)
		}
	}
}

// TestRouteForAnthropic: a request for Anthropic's API reaches its own
// collections only: /files is Anthropic's Files API, whose objects are of a
// kind of their own, and OpenAI's other collections are not Anthropic's.
func TestRouteForAnthropic(t *testing.T) {
	tests := []struct {
		method, path string
		want         Access
	}{
		{"POST", "/files", Access{Op: Create, Kind: "anthropic_file", API: Anthropic}},
		{"GET", "/files", Access{Op: List, Kind: "anthropic_file", API: Anthropic}},
		{"GET", "/files/file_011abc", Access{Op: Object, Kind: "anthropic_file", ID: "file_011abc", API: Anthropic}},
		{"GET", "/files/file_011abc/content", Access{Op: Object, Kind: "anthropic_file", ID: "file_011abc", API: Anthropic}},
		{"DELETE", "/files/file_011abc", Access{Op: Object, Kind: "anthropic_file", ID: "file_011abc", Delete: true, API: Anthropic}},
		{"GET", "/messages/batches", Access{Op: List, Kind: "message_batch", API: Anthropic}},
		{"POST", "/messages/batches/msgbatch_1/cancel", Access{Op: Object, Kind: "message_batch", ID: "msgbatch_1", API: Anthropic}},
		{"GET", "/models/claude-sonnet-4-5", Access{Op: None, API: Anthropic}},
		{"GET", "/batches", Access{Op: None, API: Anthropic}},
		{"POST", "/messages", Access{Op: None, API: Anthropic}},
	}
	for _, tt := range tests {
		if got := RouteFor(Anthropic, tt.method, tt.path); got != tt.want {
			t.Errorf("RouteFor(anthropic, %s %s) = %+v; want %+v", tt.method, tt.path, got, tt.want)
		}
	}
	if got := Route("GET", "/messages/batches/msgbatch_1"); got.API != Anthropic || got.Kind != "message_batch" {
		t.Errorf("Route(GET /messages/batches/msgbatch_1) = %+v; want Anthropic's message batch", got)
	}
	if got := RouteFor(OpenAI, "GET", "/files/file-abc"); got.Kind != "file" || !IsAPI(got.API, OpenAI) {
		t.Errorf("RouteFor(openai, GET /files/file-abc) = %+v; want OpenAI's file", got)
	}
}

func TestKindAPI(t *testing.T) {
	for kind, want := range map[string]string{"anthropic_file": Anthropic, "message_batch": Anthropic, "file": OpenAI, "response": OpenAI, "": OpenAI} {
		if got := KindAPI(kind); got != want {
			t.Errorf("KindAPI(%q) = %q; want %q", kind, got, want)
		}
	}
}

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

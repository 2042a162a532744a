package objects

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// flakyStore is a Store whose writes fail while down is set.
type flakyStore struct {
	*Memory
	mu     sync.Mutex // protects down
	down   bool
	claims chan string // each successful claim's id
}

func (f *flakyStore) setDown(v bool) { f.mu.Lock(); f.down = v; f.mu.Unlock() }

func (f *flakyStore) isDown() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.down }

func (f *flakyStore) Claim(ctx context.Context, id string, o Owner) (Owner, error) {
	if f.isDown() {
		return Owner{}, errors.New("store down")
	}
	got, err := f.Memory.Claim(ctx, id, o)
	if err == nil && f.claims != nil {
		f.claims <- id
	}
	return got, err
}

func (f *flakyStore) Get(ctx context.Context, ids []string) ([]*Owner, error) {
	if f.isDown() {
		return nil, errors.New("store down")
	}
	return f.Memory.Get(ctx, ids)
}

var _ Store = (*flakyStore)(nil)

func TestRegistryKeepsRecordsTheStoreRefused(t *testing.T) {
	defer goleak.VerifyNone(t)
	fs := &flakyStore{Memory: NewMemory(0), down: true, claims: make(chan string, 4)}
	r := NewRegistry(fs, RegistryOptions{RetryEvery: time.Millisecond})
	defer r.Close()
	ctx := context.Background()

	r.Record(ctx, "a", "default", []Ref{{ID: "file-1", Kind: "file"}})
	if r.Pending() != 1 {
		t.Fatalf("pending = %d; want 1", r.Pending())
	}
	// While the store is down the owner is still known here.
	owners, err := r.Lookup(ctx, []string{"file-1", "file-2"})
	if err == nil || owners[0] == nil || owners[0].Tenant != "a" || owners[1] != nil {
		t.Fatalf("Lookup while down = %v, %v; want a pending owner and the store's error", owners, err)
	}
	fs.setDown(false)
	if id := <-fs.claims; id != "file-1" {
		t.Fatalf("retried claim of %q", id)
	}
	owners, err = r.Lookup(ctx, []string{"file-1"})
	if err != nil || owners[0] == nil || owners[0].Tenant != "a" {
		t.Fatalf("after the retry: %v, %v", owners, err)
	}
}

func TestRegistryNeverMovesAnObject(t *testing.T) {
	r := NewRegistry(NewMemory(0), RegistryOptions{})
	defer r.Close()
	ctx := context.Background()
	r.Record(ctx, "a", "default", []Ref{{ID: "batch_1", Kind: "batch"}})
	r.Record(ctx, "b", "default", []Ref{{ID: "batch_1", Kind: "batch"}})
	owners, _ := r.Lookup(ctx, []string{"batch_1", "", string(make([]byte, MaxIDLen+1))})
	if owners[0] == nil || owners[0].Tenant != "a" || owners[1] != nil || owners[2] != nil {
		t.Fatalf("owners = %v; want a, nobody, nobody", owners)
	}
	if err := r.Assign(ctx, "batch_1", Owner{Tenant: "b", Upstream: "default"}); err != nil {
		t.Fatal(err)
	}
	if owners, _ := r.Lookup(ctx, []string{"batch_1"}); owners[0].Tenant != "b" || owners[0].Created.IsZero() {
		t.Fatalf("after Assign: %+v", owners[0])
	}
	if err := r.Remove(ctx, "batch_1"); err != nil {
		t.Fatal(err)
	}
	if owners, _ := r.Lookup(ctx, []string{"batch_1"}); owners[0] != nil {
		t.Fatalf("after Remove: %+v", owners[0])
	}
}

func TestCreated(t *testing.T) {
	tests := []struct {
		name   string
		give   string
		create bool
		want   []Ref
	}{
		{"file create", `{"id":"file-1","object":"file","purpose":"batch"}`, true, []Ref{{"file-1", "file"}}},
		{"file read adds nothing", `{"id":"file-1","object":"file"}`, false, nil},
		{"batch results", `{"id":"batch_1","object":"batch","output_file_id":"file-o","error_file_id":"file-e"}`, false, []Ref{{"file-o", "file"}, {"file-e", "file"}}},
		{"upload complete", `{"id":"upload_1","object":"upload","file":{"id":"file-u","object":"file"}}`, true, []Ref{{"upload_1", "upload"}, {"file-u", "file"}}},
		{"thread run", `{"id":"run_1","object":"thread.run","thread_id":"thread_1"}`, true, []Ref{{"thread_1", "thread"}}},
		{"response items", `{"id":"resp_1","object":"response","output":[{"id":"msg_1","type":"message"},{"id":"ci_1","type":"code_interpreter_call","container_id":"cntr_1"}]}`, true,
			[]Ref{{"resp_1", "response"}, {"msg_1", "item"}, {"ci_1", "item"}, {"cntr_1", "container"}}},
		{"job results", `{"id":"ftjob-1","object":"fine_tuning.job","result_files":["file-r"]}`, false, []Ref{{"file-r", "file"}}},
		{"job's model", `{"id":"ftjob-1","object":"fine_tuning.job","fine_tuned_model":"ft:gpt-4o-mini:o::x"}`, false, []Ref{{"ft:gpt-4o-mini:o::x", "model"}}},
		{"anthropic file upload", `{"id":"file_011a","type":"file","filename":"a.txt","mime_type":"text/plain","size_bytes":3,"created_at":"2025-01-01T00:00:00Z"}`, true, []Ref{{"file_011a", "anthropic_file"}}},
		{"anthropic file deleted", `{"id":"file_011a","type":"file_deleted"}`, true, nil},
		{"anthropic message batch", `{"id":"msgbatch_1","type":"message_batch"}`, true, []Ref{{"msgbatch_1", "message_batch"}}},
		{"other object", `{"id":"x","object":"list"}`, true, nil},
		{"not JSON", `data: {}`, true, nil},
	}
	for _, tt := range tests {
		got := Created([]byte(tt.give), tt.create)
		if len(got) != len(tt.want) {
			t.Errorf("%s: Created = %v; want %v", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: Created = %v; want %v", tt.name, got, tt.want)
			}
		}
	}
}

func TestPageEncodeKeepsItsShape(t *testing.T) {
	p, err := ParsePage([]byte(`{"object":"list","data":[{"id":"a","x":1},{"id":"b"},{"id":"c"}],"first_id":"a","last_id":"c","has_more":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.IDs) != 3 || p.IDs[1] != "b" || !p.HasMore {
		t.Fatalf("page = %+v", p)
	}
	got := string(p.Encode(p.Items[1:2], p.IDs[1:2], false))
	want := `{"data":[{"id":"b"}],"first_id":"b","has_more":false,"last_id":"b","object":"list"}`
	if got != want {
		t.Fatalf("Encode = %s\nwant     %s", got, want)
	}
	if got := string(p.Encode(nil, nil, true)); got != `{"data":[],"first_id":null,"has_more":true,"last_id":null,"object":"list"}` {
		t.Fatalf("empty Encode = %s", got)
	}
}

package cache

import (
	"context"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

func TestGetMany(t *testing.T) {
	srv := redistest.Start(t)
	mem := NewMemory(MemoryOptions{})
	t.Cleanup(func() { _ = mem.Close() })
	stores := map[string]interface {
		Store
		MultiGetter
	}{
		"memory": mem,
		"redis":  NewRedis(srv.Client(), RedisOptions{}),
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := &Entry{Status: 404, Body: []byte(`{"error":{}}`)}
			if err := s.Set(ctx, "corral:v1:{t:h}:n", e, time.Minute); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetMany(ctx, "corral:v1:{t:h}:r", "corral:v1:{t:h}:n")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0] != nil || got[1] == nil || got[1].Status != 404 || string(got[1].Body) != `{"error":{}}` {
				t.Errorf("GetMany = %v; want [nil, the 404 entry]", got)
			}
		})
	}
	t.Run("corrupt is a miss", func(t *testing.T) {
		ctx := context.Background()
		rdb := srv.Client()
		rdb.Set(ctx, "corral:v1:{t:x}:r", "garbage", time.Minute)
		got, err := stores["redis"].GetMany(ctx, "corral:v1:{t:x}:r")
		if err != nil || got[0] != nil {
			t.Errorf("GetMany(corrupt) = %v, %v; want a miss", got, err)
		}
	})
}

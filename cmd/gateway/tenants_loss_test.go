package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// TestAdminChangesHoldAfterRedisLosesItsData: three gateway processes on
// one redis-server hold a store history of several changes; the server
// then loses its data (FLUSHALL, or a restart without persistence on the
// same port) and the new history starts at a lower revision. Every change
// made afterwards holds on all three within 1 s: a new key answers, a
// revoked key and a deleted tenant's key are refused, and the tenant the
// store lost is gone everywhere.
func TestAdminChangesHoldAfterRedisLosesItsData(t *testing.T) {
	bin := buildGateway(t)
	tests := []struct {
		name string
		lose func(rs *redistest.Server)
	}{
		{"flushall", func(rs *redistest.Server) {
			if err := rs.Client().FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"restart without persistence", func(rs *redistest.Server) {
			if !rs.Stoppable() {
				t.Skip("needs a redis-server the test can restart")
			}
			rs.Stop()
			rs.Restart()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := redistest.Start(t)
			mock := serveMock(t, mockllm.Options{})
			file := writeTenantsFile(t, tenantYAML("wired", tenant.HashKey("sk-wired")))
			env := []string{
				"CORRAL_REDIS_URL=" + rs.URL(),
				"CORRAL_UPSTREAM_URL=" + mock.URL + "/v1",
				"CORRAL_TENANTS_FILE=" + file,
				"CORRAL_ADMIN_TOKEN=adm",
			}
			var bases []string
			for range 3 {
				base, _ := startGateway(t, bin, env)
				bases = append(bases, base)
			}
			allAnswer := func(what, key string, want int) {
				t.Helper()
				for i, base := range bases {
					within(t, time.Second, fmt.Sprintf("%s on instance %d", what, i), func() bool {
						return chatCode(t, base, key, what) == want
					})
				}
			}
			// A history of seven changes before the loss.
			mustAdmin(t, http.StatusCreated, bases[0], "POST", "/admin/tenants", `{"id":"lost"}`)
			var lostKey string
			for range 6 {
				lostKey, _ = newKeyOn(t, bases[1], "lost", "")
			}
			allAnswer("the lost tenant's key before the loss", lostKey, 200)

			tt.lose(rs)

			// The new history: two changes, below the seven every instance holds.
			mustAdmin(t, http.StatusCreated, bases[2], "POST", "/admin/tenants", `{"id":"after"}`)
			newKey, _ := newKeyOn(t, bases[0], "after", "")
			allAnswer("a key made after the loss", newKey, 200)
			allAnswer("the key of a tenant the store lost", lostKey, 401)

			revoked, revokedID := newKeyOn(t, bases[1], "after", "")
			allAnswer("a second key made after the loss", revoked, 200)
			mustAdmin(t, http.StatusOK, bases[2], "DELETE", "/admin/tenants/after/keys/"+revokedID, "")
			allAnswer("a key revoked after the loss", revoked, 401)
			allAnswer("the kept key", newKey, 200)

			mustAdmin(t, http.StatusOK, bases[0], "DELETE", "/admin/tenants/after", "")
			allAnswer("a deleted tenant's key", newKey, 401)

			mustAdmin(t, http.StatusCreated, bases[1], "POST", "/admin/tenants", `{"id":"lost"}`)
			again, _ := newKeyOn(t, bases[2], "lost", "")
			allAnswer("a key of the tenant made again", again, 200)
			allAnswer("the old key of the tenant made again", lostKey, 401)
		})
	}
}

package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A port another test binary's server took between freePort and the start
// must not be mistaken for the new server: two tests would share one Redis
// and see each other's keys, counts and locks.
func TestStartReadyRefusesAnotherServersPort(t *testing.T) {
	other := Start(t)
	if !other.Stoppable() {
		t.Skip("external server")
	}
	bin := lookPaths(t, "", "redis-server")[0]
	var ports []int
	addr, cmd := startReady(t, func(port int) *exec.Cmd {
		if len(ports) == 0 {
			port = other.port // as if the other server won the race
		}
		ports = append(ports, port)
		return exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--loglevel", "warning")
	})
	t.Cleanup(func() { killAll([]*exec.Cmd{cmd}) })
	if len(ports) != 2 || ports[0] != other.port {
		t.Fatalf("ports tried = %v; want the taken port %d, then one more", ports, other.port)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	pid, err := serverPID(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if pid != cmd.Process.Pid || addr == other.Addr() {
		t.Fatalf("started %s answering as pid %d; want its own process %d, not the other server at %s", addr, pid, cmd.Process.Pid, other.Addr())
	}
}

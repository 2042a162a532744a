package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
)

// CPU layout when pinning: the proxy under test (a gateway, or the floor
// proxy in its turn) gets one core to itself; the load generator, the
// mock model and redis-server share the other. The ratios then compare
// the proxies' code on equal footing instead of how the scheduler mixed
// four busy processes over two cores.
const (
	proxyCPU = 0
	loadCPU  = 1
)

// pinner decides whether children are pinned with taskset.
type pinner struct {
	taskset string // path of taskset; "" when pinning is off
	reason  string // why pinning is off, for the report
}

func (p *pinner) enabled() bool { return p != nil && p.taskset != "" }

// newPinner turns pinning on when asked, taskset exists and the machine
// has the two CPUs the layout needs.
func newPinner(want bool) *pinner {
	switch {
	case !want:
		return &pinner{reason: "disabled by -pin=false"}
	case runtime.NumCPU() < 2:
		return &pinner{reason: fmt.Sprintf("only %d CPU available", runtime.NumCPU())}
	}
	path, err := exec.LookPath("taskset")
	if err != nil {
		return &pinner{reason: "taskset not found"}
	}
	return &pinner{taskset: path}
}

// pinSelf moves every thread of the harness process to cpu (taskset -a),
// so the load generator shares a core with the mock and not with the
// proxy under test. Threads created later inherit the mask. GOMAXPROCS
// follows, so the Go scheduler does not run two Ps on one core.
func (p *pinner) pinSelf(cpu int) error {
	if !p.enabled() {
		return nil
	}
	out, err := exec.Command(p.taskset, "-a", "-p", "-c", strconv.Itoa(cpu), strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p: %v: %s", err, out)
	}
	runtime.GOMAXPROCS(1)
	return nil
}

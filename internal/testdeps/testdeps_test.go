package testdeps

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBin is a directory to be the whole PATH of tools/testdeps.sh: an id
// that prints uid, an apt-get (when apt) that logs its arguments to
// apt.log and whose install creates the programs, and the programs in
// have.
func fakeBin(t *testing.T, uid int, apt bool, have ...string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("id", fmt.Sprintf("echo %d\n", uid))
	for _, p := range have {
		write(p, "exit 0\n")
	}
	if apt {
		var install strings.Builder
		for _, p := range []string{"redis-server", "redis-cli", "chromium"} {
			fmt.Fprintf(&install, "  printf '#!/bin/sh\\n' > %q; /bin/chmod +x %q\n", filepath.Join(dir, p), filepath.Join(dir, p))
		}
		write("apt-get", fmt.Sprintf("printf '%%s\\n' \"$*\" >> %q\nif [ \"$1\" = install ]; then\n%sfi\n",
			filepath.Join(dir, "apt.log"), install.String()))
	}
	return dir
}

// runScript runs tools/testdeps.sh with PATH=dir and returns its exit
// code and stderr.
func runScript(t *testing.T, dir string) (int, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	cmd := exec.Command(bash, "../../tools/testdeps.sh")
	cmd.Env = []string{"PATH=" + dir}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	default:
		t.Fatalf("run testdeps.sh: %v", err)
		return 0, ""
	}
}

func aptLog(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "apt.log"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScriptDoesNothingWhenInstalled(t *testing.T) {
	dir := fakeBin(t, 0, true, "redis-server", "redis-cli", "chromium")
	if code, stderr := runScript(t, dir); code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	if log := aptLog(t, dir); log != "" {
		t.Errorf("apt-get ran: %q", log)
	}
}

func TestScriptInstallsAsRootWithAptGet(t *testing.T) {
	dir := fakeBin(t, 0, true)
	if code, stderr := runScript(t, dir); code != 0 {
		t.Fatalf("exit %d, stderr %q; want 0", code, stderr)
	}
	if log, want := aptLog(t, dir), "update -qq\ninstall -y -qq redis-server chromium\n"; log != want {
		t.Errorf("apt-get calls = %q, want %q", log, want)
	}
}

func TestScriptInstallsOnlyWhatIsMissing(t *testing.T) {
	dir := fakeBin(t, 0, true, "redis-server", "redis-cli")
	if code, stderr := runScript(t, dir); code != 0 {
		t.Fatalf("exit %d, stderr %q; want 0", code, stderr)
	}
	if log, want := aptLog(t, dir), "update -qq\ninstall -y -qq chromium\n"; log != want {
		t.Errorf("apt-get calls = %q, want %q", log, want)
	}
}

func TestScriptStopsWithTheCommandWhenNotRoot(t *testing.T) {
	dir := fakeBin(t, 1000, true, "redis-cli")
	code, stderr := runScript(t, dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
	}
	if want := "sudo apt-get install -y redis-server chromium\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not give %q", stderr, want)
	}
	if log := aptLog(t, dir); log != "" {
		t.Errorf("apt-get ran without root: %q", log)
	}
}

func TestScriptStopsWithTheCommandWithoutAptGet(t *testing.T) {
	dir := fakeBin(t, 0, false, "redis-server", "chromium")
	code, stderr := runScript(t, dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
	}
	if want := "sudo apt-get install -y redis-tools\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not give %q", stderr, want)
	}
}

// recorder is a testing.TB that records how Missing ended the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

func TestMissingFailsWhenStrict(t *testing.T) {
	for _, env := range [][2]string{{"CORRAL_TEST_STRICT", "1"}, {"CI", "true"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv("CORRAL_TEST_STRICT", "")
			t.Setenv("CI", "")
			t.Setenv(env[0], env[1])
			r := &recorder{TB: t}
			Missing(r, "redis-server", "")
			if r.skip != "" || !strings.Contains(r.fatal, "redis-server") || !strings.Contains(r.fatal, "tools/testdeps.sh") {
				t.Errorf("fatal %q, skip %q; want a failure naming redis-server and tools/testdeps.sh", r.fatal, r.skip)
			}
		})
	}
}

func TestMissingSkipsOtherwise(t *testing.T) {
	t.Setenv("CORRAL_TEST_STRICT", "")
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	Missing(r, "chromium", "; the console's browser tests need it")
	if r.fatal != "" || !strings.Contains(r.skip, "chromium") || !strings.Contains(r.skip, "browser tests") {
		t.Errorf("fatal %q, skip %q; want a skip naming chromium and the hint", r.fatal, r.skip)
	}
}

// TestMakeTestInstallsFirstAndIsStrict: `make test` runs tools/testdeps.sh
// before anything is built, and every go test it runs has
// CORRAL_TEST_STRICT=1, so a missing program fails rather than skips.
func TestMakeTestInstallsFirstAndIsStrict(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		Missing(t, "make", "")
		return
	}
	cmd := exec.Command(mk, "-n", "--no-print-directory", "test")
	cmd.Dir = "../.."
	// Run under make test itself, this make would be a sub-make: without
	// the parent's variables it prints only its own recipe.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GO=go")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n test: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "./tools/testdeps.sh" {
		t.Errorf("make test starts with %q, want ./tools/testdeps.sh", lines[0])
	}
	tests := 0
	for _, l := range lines {
		if strings.Contains(l, "go test") {
			tests++
			if !strings.HasPrefix(l, "CORRAL_TEST_STRICT=1 ") {
				t.Errorf("make test runs %q without CORRAL_TEST_STRICT=1", l)
			}
		}
	}
	if tests == 0 {
		t.Errorf("make -n test ran no go test:\n%s", out)
	}
}

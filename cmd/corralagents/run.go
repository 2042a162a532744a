package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The CLI versions the fixtures in internal/server/testdata/agents were
// captured with; `make agents` installs these.
const (
	codexPackage  = "@openai/codex@0.171.0"
	claudePackage = "@anthropic-ai/claude-code@2.1.197"
)

const (
	// agentLimit bounds one agent run that should answer.
	agentLimit = 3 * time.Minute
	// wrongKeyLimit is how soon Claude Code must give up on a wrong key:
	// a 401 it may not retry ends it at once, one it retries keeps it
	// going for minutes.
	wrongKeyLimit = 15 * time.Second

	codexPrompt  = "Say hello to Corral in one short sentence. Do not run any command."
	claudePrompt = "Say hello to Corral in one short sentence."
	claudeModel  = "claude-sonnet-5-5"
	codexModel   = "gpt-5-codex"
)

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("corralagents", flag.ContinueOnError)
	cache, _ := os.UserCacheDir()
	dir := fs.String("dir", filepath.Join(cache, "corral", "agents"), "npm install directory for the two CLIs")
	gatewayBin := fs.String("gateway", "", "gateway binary to run (default: build ./cmd/gateway)")
	record := fs.String("record", "", "write every request the agents send to this directory as fixtures")
	only := fs.String("only", "", `run only "codex" or "claude"`)
	if err := fs.Parse(args); err != nil {
		return err
	}

	codex, claude, err := install(ctx, *dir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "corralagents-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bin := *gatewayBin
	if bin == "" {
		if bin, err = buildGateway(ctx, tmp); err != nil {
			return err
		}
	}
	logf, err := os.Create(filepath.Join(tmp, "gateway.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	gw, err := startGateway(ctx, bin, logf)
	if err != nil {
		return err
	}
	defer gw.stop()
	rec, err := startRecorder(gw.base)
	if err != nil {
		return err
	}
	defer rec.close()
	fmt.Printf("demo gateway at %s, recorder at %s\n", gw.base, rec.base)

	var failed []string
	check := func(name string, err error) {
		if err != nil {
			fmt.Printf("FAIL %s: %v\n", name, err)
			failed = append(failed, name)
			return
		}
		fmt.Printf("ok   %s\n", name)
	}
	if *only == "" || *only == "codex" {
		check("codex exec", runCodex(ctx, codex, tmp, gw, rec))
	}
	if *only == "" || *only == "claude" {
		check("claude -p: MISS then HIT", runClaudeTwice(ctx, claude, tmp, gw, rec))
		check("claude -p: a tool call and its result, two turns", runClaudeTool(ctx, claude, tmp, rec))
		check("claude -p: a wrong key stops within "+wrongKeyLimit.String(), runClaudeWrongKey(ctx, claude, tmp, rec))
	}
	if *record != "" && (*only == "" || *only == "codex") {
		// Capture only: Codex has no turn limit, so a model that always
		// calls a tool would keep it going; it is stopped after its second
		// request, which carries the call and its output.
		if err := captureCodexTool(ctx, codex, tmp, rec); err != nil {
			fmt.Printf("capture of codex's second turn: %v\n", err)
		}
	}
	if *record != "" {
		if err := rec.write(*record); err != nil {
			return err
		}
		fmt.Printf("fixtures written to %s\n", *record)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of the agent checks failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// install makes sure both CLIs are in dir, installing the pinned versions
// with npm when one is missing, and returns their paths.
func install(ctx context.Context, dir string) (codex, claude string, err error) {
	codex = filepath.Join(dir, "node_modules", ".bin", "codex")
	claude = filepath.Join(dir, "node_modules", ".bin", "claude")
	if exists(codex) && exists(claude) {
		return codex, claude, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("install: %w", err)
	}
	fmt.Printf("installing %s and %s into %s (about 660 MB)\n", codexPackage, claudePackage, dir)
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", codexPackage, claudePackage)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("install: npm: %w", err)
	}
	if !exists(codex) || !exists(claude) {
		return "", "", errors.New("install: npm finished but a CLI is missing")
	}
	return codex, claude, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// agentRun is one finished run of a CLI.
type agentRun struct {
	out     string
	err     error
	elapsed time.Duration
}

// runAgent runs bin with args in a fresh HOME (and work directory) under
// root, with env added to a minimal environment, for at most limit.
func runAgent(ctx context.Context, root, name, bin string, args, env []string, limit time.Duration) (agentRun, error) {
	home, err := os.MkdirTemp(root, name+"-home-")
	if err != nil {
		return agentRun{}, err
	}
	return runIn(ctx, home, bin, args, env, limit), nil
}

func runIn(ctx context.Context, home, bin string, args, env []string, limit time.Duration) agentRun {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	work := filepath.Join(home, "work")
	_ = os.MkdirAll(work, 0o755)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = work
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb", "NO_COLOR=1"}, env...)
	// The npm launchers start the native CLI as a child: a timeout ends
	// the whole process group, not only the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	r := agentRun{out: strings.TrimSpace(out.String()), err: err, elapsed: time.Since(start)}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("still running after %s", limit)
	}
	fmt.Printf("---- %s %s (%s, %v)\n%s\n----\n", filepath.Base(bin), strings.Join(args, " "), r.elapsed.Round(time.Millisecond), r.err, r.out)
	return r
}

// codexConfig is the Codex configuration of the README's Codex section,
// for the gateway at base.
func codexConfig(base, model string) string {
	return `model = "` + model + `"
model_provider = "corral"
check_for_update_on_startup = false

[model_providers.corral]
name = "Corral"
base_url = "` + base + `/v1"
env_key = "CORRAL_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[otel]
exporter = "none"
`
}

// codexHome writes a Codex home with the README's config.toml for
// model, pointed at rec.
func codexHome(root, model string, rec *recorder) (home, codexHome string, err error) {
	home, err = os.MkdirTemp(root, "codex-home-")
	if err != nil {
		return "", "", err
	}
	codexHome = filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		return "", "", err
	}
	return home, codexHome, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(rec.base, model)), 0o600)
}

func captureCodexTool(ctx context.Context, codex, root string, rec *recorder) error {
	rec.begin("codex-tool")
	home, ch, err := codexHome(root, codexModel+"-tool", rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for ctx.Err() == nil && len(rec.calls("codex-tool")) < 2 {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second) // let the second answer go out
		cancel()
	}()
	runIn(ctx, home, codex, []string{"exec", "--skip-git-repo-check", "--sandbox", "read-only", codexPrompt},
		[]string{"CODEX_HOME=" + ch, "CORRAL_API_KEY=" + demoKey}, agentLimit)
	if n := len(rec.calls("codex-tool")); n < 2 {
		return fmt.Errorf("%d requests", n)
	}
	return nil
}

func runCodex(ctx context.Context, codex, root string, gw *gateway, rec *recorder) error {
	rec.begin("codex")
	home, codexHome, err := codexHome(root, codexModel, rec)
	if err != nil {
		return err
	}
	r := runIn(ctx, home, codex, []string{"exec", "--skip-git-repo-check", "--sandbox", "read-only", codexPrompt},
		[]string{"CODEX_HOME=" + codexHome, "CORRAL_API_KEY=" + demoKey}, agentLimit)
	if r.err != nil {
		return fmt.Errorf("codex exec: %w", r.err)
	}
	if !strings.Contains(r.out, "mock reply to:") {
		return errors.New("codex exec: the mock model's answer is not in its output")
	}
	return nil
}

// claudeEnv is Claude Code's environment for the gateway at base with key.
func claudeEnv(base, key string) []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=" + key,
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
}

// runClaudeTwice runs the same `claude -p` twice in one HOME: the first
// run's Messages call must be a MISS, the second's a HIT.
func runClaudeTwice(ctx context.Context, claude, root string, gw *gateway, rec *recorder) error {
	home, err := os.MkdirTemp(root, "claude-home-")
	if err != nil {
		return err
	}
	args := []string{"-p", claudePrompt, "--model", claudeModel}
	var caches [2][]string
	for i := range 2 {
		rec.begin("claude")
		before := len(rec.calls("claude"))
		mark := gw.mark()
		r := runIn(ctx, home, claude, args, claudeEnv(rec.base, demoKey), agentLimit)
		if r.err != nil {
			return fmt.Errorf("claude -p run %d: %w", i+1, r.err)
		}
		if !strings.Contains(r.out, "mock reply to:") {
			return fmt.Errorf("claude -p run %d: the mock model's answer is not in its output", i+1)
		}
		lines, err := awaitLines(ctx, gw, mark, len(rec.calls("claude"))-before)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if l.Method == "POST" && strings.HasPrefix(l.Path, "/v1/messages") && !strings.Contains(l.Path, "count_tokens") {
				caches[i] = append(caches[i], l.Cache)
			}
		}
	}
	fmt.Printf("claude -p Messages calls: first run %v, second run %v\n", caches[0], caches[1])
	if len(caches[0]) == 0 || len(caches[1]) == 0 {
		return errors.New("no Messages call in the access log")
	}
	if last(caches[0]) != "MISS" || last(caches[1]) != "HIT" {
		return fmt.Errorf("the answering Messages call was %s then %s; want MISS then HIT", last(caches[0]), last(caches[1]))
	}
	return nil
}

func last(s []string) string { return s[len(s)-1] }

// awaitLines waits until the gateway has logged n access lines of API
// calls (paths under /v1/) after mark, and returns those: a line is
// written once its answer is sent, so it can trail the agent's exit.
func awaitLines(ctx context.Context, gw *gateway, mark, n int) ([]accessLine, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lines []accessLine
		for _, l := range gw.since(mark) {
			if strings.HasPrefix(l.Path, "/v1/") {
				lines = append(lines, l)
			}
		}
		if len(lines) >= n {
			return lines, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("access log: %d API lines after 10s, want %d", len(lines), n)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runClaudeTool runs `claude -p` for two turns with a model name that
// makes the mock answer with a tool call: Claude Code runs the tool (or
// refuses its input) and sends the result back, so the second call's
// history holds a tool_use and its tool_result, and must be answered too.
func runClaudeTool(ctx context.Context, claude, root string, rec *recorder) error {
	rec.begin("claude-tool")
	r, err := runAgent(ctx, root, "claude-tool", claude, []string{"-p", claudePrompt, "--model", claudeModel + "-tool", "--max-turns", "2"},
		claudeEnv(rec.base, demoKey), agentLimit)
	if err != nil {
		return err
	}
	calls := rec.calls("claude-tool")
	var turns []Fixture
	for _, c := range calls {
		if c.Method == "POST" && strings.HasPrefix(c.Path, "/v1/messages") && !strings.Contains(c.Path, "count_tokens") {
			turns = append(turns, c)
		}
	}
	if len(turns) < 2 {
		return fmt.Errorf("claude -p sent %d Messages calls, want 2 (exit: %v)", len(turns), r.err)
	}
	if !strings.Contains(turns[1].Body, `"tool_result"`) {
		return errors.New("claude -p's second call carries no tool_result")
	}
	for _, t := range turns[:2] {
		if t.Status != 200 {
			return fmt.Errorf("claude -p turn answered %d", t.Status)
		}
	}
	return nil
}

// runClaudeWrongKey runs `claude -p` with a key the gateway does not know:
// it must fail, and within wrongKeyLimit.
func runClaudeWrongKey(ctx context.Context, claude, root string, rec *recorder) error {
	rec.begin(wrongKeyAgent)
	r, err := runAgent(ctx, root, "claude-wrong", claude, []string{"-p", claudePrompt, "--model", claudeModel},
		claudeEnv(rec.base, "sk-corral-not-a-key"), wrongKeyLimit)
	if err != nil {
		return err
	}
	var exit *exec.ExitError
	if r.err == nil {
		return errors.New("claude -p answered with a wrong key")
	}
	if !errors.As(r.err, &exit) {
		return r.err // still running at the limit
	}
	return nil
}

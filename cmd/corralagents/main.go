// Command corralagents runs the real coding agents, OpenAI's Codex CLI and
// Anthropic's Claude Code, against a demo gateway, and fails when one of
// them does not work through Corral. It is `make agents`: opt-in, never in
// CI or `make test`, because the two npm packages are about 660 MB.
//
// It installs the pinned CLI versions with npm into a cache directory when
// they are missing, builds and starts `gateway -demo` on a free port
// (CORRAL_ADDR=127.0.0.1:0; the mock model is the upstream), puts a
// recording reverse proxy in front of it, and then checks, in order:
//
//   - `codex exec` answers (exit 0) through /v1/responses;
//   - `claude -p` answers, and the identical second run is a cache HIT in
//     the gateway's access log where the first was a MISS;
//   - `claude -p` with a wrong key exits non-zero within wrongKeyLimit.
//
// Each agent runs with HOME in a fresh temporary directory and its
// telemetry, update checks and other non-essential traffic off.
//
// With -record DIR every request the agents sent is written to DIR as a
// fixture (method, path with query, the headers that matter with key
// values replaced by a placeholder, the body verbatim), one JSON file per
// request: internal/server/testdata/agents holds them.
//
// Flags:
//
//	-dir DIR       npm install directory [user cache dir/corral/agents]
//	-gateway BIN   a gateway binary to run instead of building ./cmd/gateway
//	-record DIR    write the agents' requests to DIR as fixtures
//	-only NAME     run only "codex" or "claude"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "corralagents:", err)
		}
		os.Exit(1)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/config"
)

// healthcheck asks a running gateway whether it is ready and returns nil
// only for a 200 from /readyz (whose status, when the body has one, is
// "ready" or "ok"). It exists because
// the image is distroless (no shell, no curl) and a container healthcheck
// needs a program inside it; Dockerfile and docker-compose.yml run it.
// The address comes from CORRAL_ADDR, the variable the gateway itself
// listens on, so the two cannot disagree.
func healthcheck(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("url", "", "readiness URL (default http://127.0.0.1:<CORRAL_ADDR port>/readyz)")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *target == "" {
		cfg, err := config.Load(environ)
		if err != nil {
			return err
		}
		u, err := readyURL(cfg.Addr)
		if err != nil {
			return err
		}
		*target = u
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body)
	// A 200 is ready unless its body says otherwise; any -url (the mock
	// model's /v1/models, in compose) can be checked the same way.
	if resp.StatusCode != http.StatusOK || (body.Status != "" && body.Status != "ready" && body.Status != "ok") {
		return fmt.Errorf("healthcheck: %s answered %d, status %q: not ready", *target, resp.StatusCode, body.Status)
	}
	_, _ = fmt.Fprintln(stdout, "ready")
	return nil
}

// readyURL turns a listen address into the loopback URL of its /readyz:
// ":8080" and "0.0.0.0:8080" listen on every interface, loopback included.
func readyURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("healthcheck: CORRAL_ADDR %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

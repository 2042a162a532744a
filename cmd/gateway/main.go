// Command gateway runs Corral, the OpenAI-compatible LLM gateway.
//
//	gateway              serve with configuration from CORRAL_* variables
//	gateway -demo        serve with the built-in mock model and a demo key
//	gateway keygen       print a new tenant key and its tenants-file line
//	gateway healthcheck  exit 0 when the gateway at CORRAL_ADDR is ready
//	gateway tenants      list, create or delete API tenants (admin API)
//	gateway keys         create, list or revoke API keys (admin API)
//	gateway help         list the subcommands and every CORRAL_* variable
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "corral:", err)
		os.Exit(1)
	}
}

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/corralhq/corral/internal/config"
)

// subcommands are the words gateway accepts before any flag, in the order
// help lists them.
var subcommands = []struct{ usage, doc string }{
	{"gateway", "serve with the configuration from the CORRAL_* variables below"},
	{"gateway -demo", "serve the built-in mock model with the demo key sk-corral-demo (no account, no network)"},
	{"gateway keygen", "print a new tenant key and the sha256 line for the tenants file"},
	{"gateway healthcheck [-url URL] [-timeout D]", "exit 0 when the gateway at CORRAL_ADDR answers ready on /readyz (for container healthchecks)"},
	{"gateway tenants list|create|delete", "list, create (-policy JSON) or delete API tenants of the gateway at CORRAL_ADMIN_URL (CORRAL_ADMIN_TOKEN); -h for each"},
	{"gateway keys create|list|revoke", "make (-name, -expires), list or revoke an API tenant's keys through the admin API; -h for each"},
	{"gateway help, gateway -h", "print this help"},
}

func subcommandNames() string {
	return "keygen, healthcheck, tenants, keys, help"
}

// writeHelp prints the subcommands and every variable with its default and
// meaning, generated from config.Config so it cannot drift from what Corral
// reads.
func writeHelp(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Corral, an OpenAI-compatible LLM API gateway.\n\nUsage:\n")
	for _, c := range subcommands {
		fmt.Fprintf(&b, "  %-45s %s\n", c.usage, c.doc)
	}
	b.WriteString("\nEnvironment (all optional; variable, default, meaning):\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := config.WriteHelp(w); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\nDurations use Go syntax (30s, 1h); sizes are bytes or carry a unit (64KiB, 8MiB).\n")
	return err
}

package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/config"
)

// TestHelpListsSubcommandsAndVariables checks `gateway -h` and `gateway
// help` against the config struct: both succeed and list every subcommand
// and every CORRAL_* variable with its default.
func TestHelpListsSubcommandsAndVariables(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"-help"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, nil, &out, io.Discard); err != nil {
			t.Errorf("gateway %v = %v; want success", args, err)
			continue
		}
		help := out.String()
		for _, sub := range []string{"gateway -demo", "gateway keygen", "gateway healthcheck", "gateway help"} {
			if !strings.Contains(help, sub) {
				t.Errorf("gateway %v does not list %q:\n%s", args, sub, help)
			}
		}
		lines := map[string]string{}
		for _, l := range strings.Split(help, "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[0], "CORRAL_") {
				lines[f[0]] = l
			}
		}
		vars := config.Vars()
		if len(lines) != len(vars) {
			t.Errorf("gateway %v lists %d variables; Config has %d", args, len(lines), len(vars))
		}
		for _, v := range vars {
			l, ok := lines[v.Name]
			def := v.Default
			if def == "" {
				def = "(empty)"
			}
			if !ok || strings.Fields(l)[1] != def || !strings.Contains(l, v.Doc) {
				t.Errorf("gateway %v: line for %s = %q; want its default %s and doc", args, v.Name, l, def)
			}
		}
	}
}

func TestUnknownArgumentNamesSubcommands(t *testing.T) {
	err := run(context.Background(), []string{"serve"}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "healthcheck") || !strings.Contains(err.Error(), "keygen") {
		t.Errorf("gateway serve = %v; want an error listing the subcommands", err)
	}
}

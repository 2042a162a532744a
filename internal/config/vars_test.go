package config

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's variables table from Config")

func TestEveryVariableDocumented(t *testing.T) {
	vars := Vars()
	if len(vars) < 15 {
		t.Fatalf("Vars() lists %d variables; the walk over Config has lost some", len(vars))
	}
	seen := map[string]bool{}
	for _, v := range vars {
		if !strings.HasPrefix(v.Name, "CORRAL_") {
			t.Errorf("%s: every variable is named CORRAL_*", v.Name)
		}
		if seen[v.Name] {
			t.Errorf("%s: declared twice", v.Name)
		}
		seen[v.Name] = true
		if strings.TrimSpace(v.Doc) == "" {
			t.Errorf("%s: no doc tag; add doc:\"...\" to its Config field", v.Name)
		}
		if strings.ContainsAny(v.Doc, "`\n") {
			t.Errorf("%s: doc is plain text on one line (no backquotes)", v.Name)
		}
	}
	for _, want := range []Var{
		{Name: "CORRAL_ADDR", Default: ":8080"},
		{Name: "CORRAL_UPSTREAM_API_KEY", Default: "OPENAI_API_KEY"},
		{Name: "CORRAL_REDIS_URL", Default: ""},
	} {
		found := false
		for _, v := range vars {
			if v.Name == want.Name {
				found = true
				if v.Default != want.Default {
					t.Errorf("%s default = %q; want %q", v.Name, v.Default, want.Default)
				}
			}
		}
		if !found {
			t.Errorf("Vars() lacks %s", want.Name)
		}
	}
}

func TestWriteHelpListsEveryVariable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHelp(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	vars := Vars()
	if len(lines) != len(vars) {
		t.Fatalf("help has %d lines for %d variables:\n%s", len(lines), len(vars), b.String())
	}
	for i, v := range vars {
		def := v.Default
		if def == "" {
			def = "(empty)"
		}
		f := strings.Fields(lines[i])
		if len(f) < 3 || f[0] != v.Name || f[1] != def || !strings.HasSuffix(lines[i], v.Doc) {
			t.Errorf("help line %q; want %s, %s and its doc", lines[i], v.Name, def)
		}
	}
}

const (
	readmePath  = repo + "README.md"
	varsBegin   = "<!-- CORRAL_* table: generated from internal/config.Config; go test ./internal/config -run TestREADMEVariables -update -->\n"
	varsEnd     = "<!-- end of CORRAL_* table -->\n"
	updateHowTo = "go test ./internal/config -run TestREADMEVariables -update"
)

// TestREADMEVariables keeps the README's table of variables equal to the
// one Config generates: a variable added, renamed, re-defaulted or
// re-documented in the struct fails here until the README says the same.
func TestREADMEVariables(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	before, rest, ok := strings.Cut(readme, varsBegin)
	table, after, ok2 := strings.Cut(rest, varsEnd)
	if !ok || !ok2 {
		t.Fatalf("README.md lacks the markers %q and %q around the variables table", varsBegin, varsEnd)
	}
	want := MarkdownTable()
	if table == want {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(before+varsBegin+want+varsEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := strings.Split(table, "\n")
	for i, line := range strings.Split(want, "\n") {
		if i >= len(got) || got[i] != line {
			g := "(missing)"
			if i < len(got) {
				g = got[i]
			}
			t.Fatalf("README variables table differs from Config at row %d:\n got %s\nwant %s\nrun: %s", i, g, line, updateHowTo)
		}
	}
	t.Fatalf("README variables table has extra rows after Config's; run: %s", updateHowTo)
}

package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// Var is one CORRAL_* variable as Config declares it.
type Var struct {
	Name    string // e.g. CORRAL_CACHE_TTL
	Default string // as documented; "" = empty
	Doc     string // what it means, plain text
}

// Vars lists every variable Config reads, in field order, from the
// fields' env, envDefault, docDefault and doc tags. Nested structs are
// walked with their envPrefix, as caarlos0/env reads them, so a group of
// settings in a struct of its own is listed too.
func Vars() []Var {
	return varsOf(reflect.TypeFor[Config](), "")
}

func varsOf(t reflect.Type, prefix string) []Var {
	var out []Var
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			if f.Type.Kind() == reflect.Struct {
				out = append(out, varsOf(f.Type, prefix+f.Tag.Get("envPrefix"))...)
			}
			continue
		}
		def := f.Tag.Get("envDefault")
		if d, ok := f.Tag.Lookup("docDefault"); ok {
			def = d
		}
		out = append(out, Var{Name: prefix + name, Default: def, Doc: f.Tag.Get("doc")})
	}
	return out
}

// WriteHelp writes the variables as aligned plain text, for `gateway help`.
func WriteHelp(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, v := range Vars() {
		def := v.Default
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, def, v.Doc)
	}
	return tw.Flush()
}

// MarkdownTable returns the variables as the README's Markdown table.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range Vars() {
		def := "empty"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, strings.ReplaceAll(v.Doc, "|", `\|`))
	}
	return b.String()
}

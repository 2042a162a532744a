package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// FileError is a problem in a configuration file, located by line and
// field, e.g. "tenants file t.yaml:4: tenants[0].requests_per_minute: want
// a whole number, got "lots"".
type FileError struct {
	Kind    string // "tenants file" when empty
	File    string
	Line    int    // 0 when unknown
	Field   string // e.g. tenants[1].id; "" when the file as a whole is wrong
	Problem string
}

func (e *FileError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = "tenants file"
	}
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s %s: %s", kind, loc, e.Problem)
	}
	return fmt.Sprintf("%s %s: %s: %s", kind, loc, e.Field, e.Problem)
}

// decodeFile decodes one YAML (or JSON) document into v, strictly: unknown
// fields, values of the wrong type, a fraction where a whole number
// belongs, an empty file and a second document are all errors, and every
// error is a *FileError naming the file, the line and the field's path in
// the file (tenants[1].max_leaders), not the Go struct the YAML library
// would name. kind ("tenants file") starts each message; top describes
// what the file should hold, for the empty-file message.
func decodeFile(kind, name, top string, data []byte, v any) error {
	fail := func(line int, field, format string, args ...any) error {
		return &FileError{Kind: kind, File: name, Line: line, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return yamlError(kind, name, nil, err)
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch len(docs) {
	case 0:
		return fail(0, "", "the file is empty; want %s", top)
	case 1:
	default:
		return fail(line(docs[1].Body), "", "more than one YAML document (---); put everything in one")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField())
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(0, "", "the file is empty; want %s", top)
		}
		return yamlError(kind, name, f, err)
	}
	// The decoder truncates 2.5 into an int field without a word; a limit
	// silently rounded is a limit nobody set.
	var werr error
	ast.Walk(visitFunc(func(n ast.Node) bool {
		if werr != nil {
			return false
		}
		fn, ok := n.(*ast.FloatNode)
		if !ok {
			return true
		}
		if t := fieldType(reflect.TypeOf(v), n.GetPath()); t != nil && isInt(t) {
			werr = fail(line(n), fieldPath(n.GetPath()), "want a whole number, got %s", fn.GetToken().Value)
		}
		return true
	}), docs[0].Body)
	return werr
}

// yamlError turns the YAML library's error into a FileError at the token
// it points to, with the field's path found in the parsed file f.
func yamlError(kind, name string, f *ast.File, err error) error {
	fe := &FileError{Kind: kind, File: name, Problem: err.Error()}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return fe
	}
	tok := ye.GetToken()
	fe.Problem = ye.GetMessage()
	if f == nil {
		fe.Problem = "YAML syntax: " + fe.Problem // no tree yet, so no field to name
	}
	if tok != nil && tok.Position != nil {
		fe.Line = tok.Position.Line
		if n := nodeAt(f, tok.Position); n != nil {
			fe.Field = fieldPath(n.GetPath())
		}
	}
	var (
		te *yaml.TypeError
		ue *yaml.UnexpectedNodeTypeError
		ke *yaml.UnknownFieldError
	)
	switch {
	case errors.As(err, &te):
		fe.Problem = fmt.Sprintf("want %s, got %s", kindOf(te.DstType), shown(tok))
	case errors.As(err, &ue):
		fe.Problem = fmt.Sprintf("want %s, got %s", nodeKind(ue.Expected), nodeKind(ue.Actual))
	case errors.As(err, &ke):
		fe.Problem = strings.TrimSpace(ke.Message) + " (a typo? see the README for the fields)"
	}
	return fe
}

// nodeAt finds the node whose token starts at pos; nil when none does.
func nodeAt(f *ast.File, pos *token.Position) ast.Node {
	if f == nil {
		return nil
	}
	var found ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		ast.Walk(visitFunc(func(n ast.Node) bool {
			if found != nil {
				return false
			}
			if t := n.GetToken(); t != nil && t.Position != nil && t.Position.Line == pos.Line && t.Position.Column == pos.Column {
				if _, isMap := n.(*ast.MappingValueNode); !isMap {
					found = n
					return false
				}
			}
			return true
		}), d.Body)
	}
	return found
}

type visitFunc func(ast.Node) bool

func (f visitFunc) Visit(n ast.Node) ast.Visitor {
	if f(n) {
		return f
	}
	return nil
}

func line(n ast.Node) int {
	if t := n.GetToken(); t != nil && t.Position != nil {
		return t.Position.Line
	}
	return 0
}

// fieldPath turns a YAML path ("$.tenants[0].id") into the form the
// messages use ("tenants[0].id").
func fieldPath(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
}

// fieldType follows a YAML path through the Go type t by yaml tags;
// nil when the path leaves the type.
func fieldType(t reflect.Type, path string) reflect.Type {
	rest := fieldPath(path)
	for rest != "" {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 || (t.Kind() != reflect.Slice && t.Kind() != reflect.Array) {
				return nil
			}
			t, rest = t.Elem(), strings.TrimPrefix(rest[end+1:], ".")
			continue
		}
		seg := rest
		if i := strings.IndexAny(rest, ".["); i >= 0 {
			seg, rest = rest[:i], strings.TrimPrefix(rest[i:], ".")
		} else {
			rest = ""
		}
		switch t.Kind() {
		case reflect.Struct:
			var next reflect.Type
			for fld := range t.Fields() {
				if tag, _, _ := strings.Cut(fld.Tag.Get("yaml"), ","); tag == seg {
					next = fld.Type
				}
			}
			if next == nil {
				return nil
			}
			t = next
		case reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t != reflect.TypeFor[time.Duration]()
	}
	return false
}

// kindOf says what a Go type looks like in YAML.
func kindOf(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case isInt(t):
		return "a whole number"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return "a list"
	case t.Kind() == reflect.Map || t.Kind() == reflect.Struct:
		return "a mapping (key: value)"
	}
	return t.String()
}

func nodeKind(t ast.NodeType) string {
	switch t {
	case ast.MappingType, ast.MappingValueType:
		return "a mapping (key: value)"
	case ast.SequenceType:
		return "a list"
	case ast.StringType:
		return "a string"
	case ast.IntegerType:
		return "a whole number"
	case ast.FloatType:
		return "a number"
	case ast.BoolType:
		return "true or false"
	case ast.NullType:
		return "nothing (null)"
	}
	return t.YAMLName()
}

// shown quotes the offending value as the file has it, or names its kind
// when it is a collection.
func shown(tok *token.Token) string {
	if tok == nil {
		return "another kind of value"
	}
	switch tok.Value {
	case "[":
		return "a list"
	case "{":
		return "a mapping"
	case "-":
		return "a list"
	}
	return strconv.Quote(tok.Value)
}

package objects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// node is one JSON value of a request body, kept only as far as the
// reference positions need it: objects keep every member (duplicate keys
// included, keys folded as case-insensitive decoders compare them),
// arrays their elements, strings their text; numbers, booleans and null
// are kinds without a value.
type node struct {
	kind    nodeKind
	str     string
	members []member
	elems   []*node
}

type nodeKind uint8

const (
	kindOther nodeKind = iota // number, boolean, null
	kindString
	kindObject
	kindArray
)

// member is one key of an object, folded (see foldKey).
type member struct {
	key string
	val *node
}

// all returns the values of every member named key (folded), in order: a
// duplicate key is read by one decoder as its first value and by another
// as its last, so both are references.
func (n *node) all(key string) []*node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	var out []*node
	for _, m := range n.members {
		if m.key == key {
			out = append(out, m.val)
		}
	}
	return out
}

// strings returns the member key's string values.
func (n *node) strings(key string) []string {
	var out []string
	for _, v := range n.all(key) {
		if v.kind == kindString {
			out = append(out, v.str)
		}
	}
	return out
}

// is reports whether some "type" member of n is typ.
func (n *node) is(typ string) bool {
	for _, t := range n.strings("type") {
		if t == typ {
			return true
		}
	}
	return false
}

// each calls fn for every element of every array value of key, and for
// every object value of key itself (some decoders take a lone object
// where the schema says an array).
func (n *node) each(key string, fn func(*node)) {
	for _, v := range n.all(key) {
		switch v.kind {
		case kindArray:
			for _, e := range v.elems {
				fn(e)
			}
		case kindObject:
			fn(v)
		}
	}
}

// otherNode stands for every number, boolean and null: nothing reads
// their value, so they share one node.
var otherNode = &node{}

// parseTree reads a JSON body into nodes with encoding/json's tokenizer
// (linear in the body, escapes in keys decoded, numbers kept as text), at
// most maxDepth deep, and reads the top-level "store" flag on the way.
// Anything after the one top-level value is refused: an upstream might
// read the second value.
func parseTree(b []byte) (*node, StoreFlag, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	store := StoreAbsent
	var stack []*node
	var keys []string // per open object: the member being read ("" between members)
	var root *node
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) != 0 || root == nil {
				return nil, 0, fmt.Errorf("%w: truncated JSON", ErrBody)
			}
			return root, store, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrBody, err)
		}
		var top *node
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		} else if root != nil {
			return nil, 0, fmt.Errorf("%w: data after the JSON value", ErrBody)
		}
		// A token in an object where a key is expected is a key.
		if top != nil && top.kind == kindObject && keys[len(keys)-1] == "" {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack, keys = stack[:len(stack)-1], keys[:len(keys)-1]
				continue
			}
			k, _ := tok.(string)
			keys[len(keys)-1] = "\x00" + foldKey(k) // non-empty even for ""
			continue
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			stack, keys = stack[:len(stack)-1], keys[:len(keys)-1]
			continue
		}
		var n *node
		switch v := tok.(type) {
		case json.Delim: // '{' or '['
			if len(stack) >= maxDepth {
				return nil, 0, fmt.Errorf("%w: nested deeper than %d", ErrBody, maxDepth)
			}
			n = &node{kind: kindArray}
			if v == '{' {
				n.kind = kindObject
			}
		case string:
			n = &node{kind: kindString, str: v}
		default:
			n = otherNode
		}
		switch {
		case top == nil:
			root = n
		case top.kind == kindArray:
			if len(top.elems) >= MaxRefs && n.kind == kindString {
				// No API takes more strings in one array than a body may
				// name ids; refusing here keeps a body of a million ids
				// from being held whole.
				return nil, 0, ErrTooMany
			}
			top.elems = append(top.elems, n)
		default:
			key := keys[len(keys)-1][1:]
			keys[len(keys)-1] = ""
			top.members = append(top.members, member{key: key, val: n})
			if len(stack) == 1 && key == "store" {
				store = storeAfter(store, tok)
			}
		}
		if n.kind == kindObject || n.kind == kindArray {
			stack, keys = append(stack, n), append(keys, "")
		}
	}
}

// storeAfter is the store flag once a top-level "store" member with
// value tok has been read: only literal falses are false (a string
// "false" or a number is not), and a duplicate key cannot hide a true
// behind a false, nor a null after a false bring back the default.
func storeAfter(prev StoreFlag, tok json.Token) StoreFlag {
	if b, ok := tok.(bool); ok && !b && prev != StoreTrue {
		return StoreFalse
	}
	if tok == nil && prev == StoreAbsent {
		return StoreAbsent // a lone null is the upstream's default
	}
	return StoreTrue
}

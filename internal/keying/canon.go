package keying

import (
	"bytes"
	"fmt"
	"slices"
)

// canon is a single-pass JSON canonicaliser. It reads c.in once, writes
// canonical tokens to c.out and records request facts in c.req as it goes.
//
// Member order is the only thing that cannot be written as it is read. Each
// member goes to c.out in input order and its span is recorded on
// c.members. When an object closes with its keys out of order, its members
// are sorted and saved on c.order, and its record on c.objects says so.
// After the body, emit copies c.out to c.final once, writing reordered
// objects member by member. Rewriting each object in place when it closed
// would instead move the bytes of a deep value once per enclosing
// unsorted object: up to MaxDepth times.
//
// All scratch slices are reused across calls through canonPool, so a warm
// Parse allocates only the strings it returns.
type canon struct {
	in    []byte
	pos   int
	depth int

	out       []byte   // canonical tokens, members in input order
	final     []byte   // the canonical form, when some object was reordered
	str       []byte   // decoded string scratch, valid until the next string
	num       []byte   // number digits scratch
	keys      []byte   // decoded keys that had escapes; see member
	fold      []byte   // case-folded key scratch; see checkRootKey
	members   []member // members of the open objects, innermost last
	order     []member // members of reordered objects, in key order
	objects   []object // every object, in the order they open
	reordered int      // how many objects are reordered

	// The last value parsed, for the caller to inspect.
	kind    valueKind
	boolVal bool
	lastStr []byte // decoded string; points into in or str
	intVal  int    // the number when intOK
	intOK   bool   // the number is an integer ≥ 0 that fits an int

	req                  Request
	maxTokens, maxCompl  int
	hasMaxTok, hasMaxCpl bool
	streamOptions        int   // index in members of a top-level member dropped only when streaming, or -1
	storeFalse           bool  // top-level "store": false
	itemIDs              []int // indices in order of the item ids dropped when storeFalse; see itemDone

	policy *Policy // what this parse drops
}

// member is one "key":value pair of an object being read.
type member struct {
	// The decoded key is in[keyStart:keyEnd], or keys[^keyStart:keyEnd]
	// when keyStart < 0 (it had escapes). Offsets rather than a slice keep
	// member free of pointers, so sorting moves it without write barriers.
	keyStart, keyEnd int
	start, end       int // span in canon.out without the comma; empty when dropped
	objects          int // index in canon.objects of the first object in the value
}

// object is the record of one object.
type object struct {
	start, end  int  // span of the members in canon.out, inside the braces
	next        int  // index in canon.objects of the first object after this one's
	reorder     bool // the members are written from order[first:last]
	first, last int
}

func (c *canon) keyOf(m member) []byte {
	if m.keyStart >= 0 {
		return c.in[m.keyStart:m.keyEnd]
	}
	return c.keys[^m.keyStart:m.keyEnd]
}

type valueKind uint8

const (
	kindNull valueKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// role is where a value sits in an OpenAI request, as far as keying cares.
type role uint8

const (
	roleOther         role = iota
	roleRoot               // the body
	roleStreamOptions      // top-level "stream_options"
	roleMessages           // top-level "messages"
	roleMessage            // messages[i]
	roleContent            // messages[i].content: trimmed when a string
	rolePart               // messages[i].content[j]
	roleText               // messages[i].content[j].text: trimmed
	roleItems              // the top-level array of the policy's WithUnstoredItemIDs
	roleItem               // an element of it
)

// memberRole is the role of the value of member key in an object of role r.
func memberRole(r role, key []byte) role {
	switch r {
	case roleRoot:
		switch string(key) {
		case "messages":
			return roleMessages
		case "stream_options":
			return roleStreamOptions
		}
	case roleMessage:
		if string(key) == "content" {
			return roleContent
		}
	case rolePart:
		if string(key) == "text" {
			return roleText
		}
	}
	return roleOther
}

// elemRole is the role of the elements of an array of role r.
func elemRole(r role) role {
	switch r {
	case roleMessages:
		return roleMessage
	case roleContent:
		return rolePart
	case roleItems:
		return roleItem
	}
	return roleOther
}

func (c *canon) run(body []byte) error {
	c.in, c.pos, c.depth = body, 0, 0
	c.final, c.str, c.num, c.keys = c.final[:0], c.str[:0], c.num[:0], c.keys[:0]
	c.members, c.order, c.objects, c.reordered = c.members[:0], c.order[:0], c.objects[:0], 0
	c.req = Request{N: 1}
	c.hasMaxTok, c.hasMaxCpl = false, false
	c.streamOptions = -1
	c.storeFalse, c.itemIDs = false, c.itemIDs[:0]

	c.skipSpace()
	if c.pos == len(c.in) {
		return c.fail("empty body")
	}
	if c.in[c.pos] != '{' {
		return c.fail("body is not a JSON object")
	}
	if err := c.object(roleRoot); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos != len(c.in) {
		return c.fail("trailing data after the object")
	}
	switch {
	case c.hasMaxCpl:
		c.req.MaxTokens = c.maxCompl
	case c.hasMaxTok:
		c.req.MaxTokens = c.maxTokens
	}
	return nil
}

func (c *canon) fail(msg string) error {
	return fmt.Errorf("keying: %w: %s at offset %d", ErrInvalidJSON, msg, c.pos)
}

func (c *canon) failEOF() error {
	return fmt.Errorf("keying: %w: unexpected end of body", ErrInvalidJSON)
}

func (c *canon) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value reads one value of role r at c.pos (after white space).
func (c *canon) value(r role) error {
	c.skipSpace()
	if c.pos == len(c.in) {
		return c.failEOF()
	}
	switch b := c.in[c.pos]; b {
	case '{':
		return c.object(r)
	case '[':
		return c.array(r)
	case '"':
		return c.stringValue(r)
	case 't':
		return c.literal("true", kindBool, true)
	case 'f':
		return c.literal("false", kindBool, false)
	case 'n':
		return c.literal("null", kindNull, false)
	default:
		if b == '-' || (b >= '0' && b <= '9') {
			return c.number()
		}
		return c.fail(fmt.Sprintf("unexpected character %q", b))
	}
}

func (c *canon) literal(lit string, k valueKind, v bool) error {
	rest := c.in[c.pos:]
	if len(rest) < len(lit) || string(rest[:len(lit)]) != lit {
		if len(rest) < len(lit) && string(rest) == lit[:len(rest)] {
			return c.failEOF()
		}
		return c.fail("invalid literal")
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	c.kind, c.boolVal = k, v
	return nil
}

func (c *canon) enter() error {
	c.depth++
	if c.depth > MaxDepth {
		return c.fail(fmt.Sprintf("nesting deeper than %d", MaxDepth))
	}
	return nil
}

func (c *canon) array(r role) error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
	} else {
		er := elemRole(r)
		for {
			if err := c.value(er); err != nil {
				return err
			}
			c.skipSpace()
			if c.pos == len(c.in) {
				return c.failEOF()
			}
			b := c.in[c.pos]
			c.pos++
			if b == ']' {
				break
			}
			if b != ',' {
				c.pos--
				return c.fail("expected ',' or ']' in array")
			}
			c.out = append(c.out, ',')
		}
	}
	c.out = append(c.out, ']')
	c.depth--
	c.kind = kindArray
	return nil
}

func (c *canon) object(r role) error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++ // '{'
	c.out = append(c.out, '{')
	self := len(c.objects)
	c.objects = append(c.objects, object{start: len(c.out)})
	base := len(c.members)
	keysMark := len(c.keys)
	emitted := 0
	folds := false    // a top-level key needs a case-fold check
	itemID := false   // a roleItem has a string "id"
	itemType := false // and a "type" whose id may be dropped

	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
	} else {
		for {
			c.skipSpace()
			if c.pos == len(c.in) {
				return c.failEOF()
			}
			if c.in[c.pos] != '"' {
				return c.fail("expected a string key")
			}
			beforeComma := len(c.out)
			if emitted > 0 {
				c.out = append(c.out, ',')
			}
			start, objects := len(c.out), len(c.objects)
			key, ks, ke, err := c.key()
			if err != nil {
				return err
			}
			if r == roleRoot && needsFold(key) {
				if err := c.checkRootKey(key); err != nil {
					return err
				}
				folds = true
			}
			c.skipSpace()
			if c.pos == len(c.in) {
				return c.failEOF()
			}
			if c.in[c.pos] != ':' {
				return c.fail("expected ':' after object key")
			}
			c.pos++
			c.out = append(c.out, ':')
			mr := memberRole(r, key)
			if r == roleRoot && c.policy.items != nil && string(key) == c.policy.items.field {
				mr = roleItems
			}
			if err := c.value(mr); err != nil {
				return err
			}
			switch r {
			case roleRoot:
				c.rootFact(key)
			case roleItem:
				switch {
				case string(key) == "id" && c.kind == kindString:
					itemID = true
				case string(key) == "type" && c.kind == kindString:
					itemType = c.policy.itemType(c.lastStr)
				}
			case roleStreamOptions:
				if string(key) == "include_usage" && c.kind == kindBool {
					c.req.IncludeUsage = c.boolVal
				}
			}
			var drop Drop // the policy's word on a top-level member
			if r == roleRoot {
				drop = c.policy.drop(key)
			}
			if drop.WhenStreaming.has(c.kind) {
				c.streamOptions = len(c.members)
			}
			if drop.Always.has(c.kind) {
				// Forget the value's bytes and its objects' records.
				c.out, c.objects = c.out[:beforeComma], c.objects[:objects]
				c.members = append(c.members, member{ks, ke, beforeComma, beforeComma, objects})
			} else {
				c.members = append(c.members, member{ks, ke, start, len(c.out), objects})
				emitted++
			}

			c.skipSpace()
			if c.pos == len(c.in) {
				return c.failEOF()
			}
			b := c.in[c.pos]
			c.pos++
			if b == '}' {
				break
			}
			if b != ',' {
				c.pos--
				return c.fail("expected ',' or '}' in object")
			}
		}
		if folds {
			if err := c.checkRootFolds(c.members[base:]); err != nil {
				return err
			}
		}
		rewrite := false
		if r == roleRoot && c.req.Stream && c.streamOptions >= 0 {
			m := &c.members[c.streamOptions]
			m.start = m.end // drop
			rewrite = true
		}
		if r == roleRoot && c.storeFalse {
			for _, i := range c.itemIDs {
				m := &c.order[i]
				m.start = m.end // drop
			}
		}
		// An item whose id may be dropped is saved member by member, so
		// the root can drop the id once it has read "store".
		candidate := r == roleItem && itemID && itemType
		if err := c.sortMembers(self, base, rewrite || candidate); err != nil {
			return err
		}
		if candidate {
			c.itemDone(self)
		}
	}
	o := &c.objects[self]
	o.end, o.next = len(c.out), len(c.objects)
	c.out = append(c.out, '}')
	c.members = c.members[:base]
	c.keys = c.keys[:keysMark]
	c.depth--
	c.kind = kindObject
	return nil
}

// itemDone records where the "id" of the item object self, just saved
// member by member on c.order, is. It runs before the object's escaped
// keys are forgotten.
func (c *canon) itemDone(self int) {
	o := &c.objects[self]
	for i := o.first; i < o.last; i++ {
		if string(c.keyOf(c.order[i])) == "id" {
			c.itemIDs = append(c.itemIDs, i)
			return
		}
	}
}

func (c *canon) compareMembers(a, b member) int {
	return bytes.Compare(c.keyOf(a), c.keyOf(b))
}

// sortMembers checks that the members c.members[base:] of object self are
// in key order, with no duplicate keys. When they are not in order, or
// rewrite is set (a member was dropped after it was written), it saves them
// in key order for emit.
func (c *canon) sortMembers(self, base int, rewrite bool) error {
	ms := c.members[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		if d := c.compareMembers(ms[i-1], ms[i]); d >= 0 {
			if d == 0 {
				return c.failDuplicate(c.keyOf(ms[i]))
			}
			sorted = false
			break
		}
	}
	if !sorted {
		slices.SortFunc(ms, c.compareMembers)
		for i := 1; i < len(ms); i++ {
			if c.compareMembers(ms[i-1], ms[i]) == 0 {
				return c.failDuplicate(c.keyOf(ms[i]))
			}
		}
	} else if !rewrite {
		return nil
	}
	o := &c.objects[self]
	o.reorder, o.first = true, len(c.order)
	c.order = append(c.order, ms...)
	o.last = len(c.order)
	c.reordered++
	return nil
}

// canonical returns the canonical form of c.out.
func (c *canon) canonical() []byte {
	if c.reordered == 0 {
		return c.out
	}
	c.emit(0, len(c.out), 0)
	return c.final
}

// emit appends c.out[lo:hi] to c.final, writing reordered objects in key
// order. The objects in [lo, hi) are c.objects[oi:] that start before hi
// (objects are recorded in the order they open, so in order of position,
// and the ones inside a member's value follow each other).
func (c *canon) emit(lo, hi, oi int) {
	for oi < len(c.objects) && c.objects[oi].start < hi {
		o := c.objects[oi]
		if !o.reorder {
			oi++
			continue
		}
		c.final = append(c.final, c.out[lo:o.start]...)
		comma := false
		for _, m := range c.order[o.first:o.last] {
			if m.start == m.end {
				continue // dropped
			}
			if comma {
				c.final = append(c.final, ',')
			}
			comma = true
			c.emit(m.start, m.end, m.objects)
		}
		lo, oi = o.end, o.next
	}
	c.final = append(c.final, c.out[lo:hi]...)
}

func (c *canon) failDuplicate(key []byte) error {
	return fmt.Errorf("keying: %w: duplicate object key %q before offset %d", ErrInvalidJSON, key, c.pos)
}

// rootFact records what the gateway needs from a top-level member whose
// value was just read.
func (c *canon) rootFact(key []byte) {
	switch string(key) {
	case "model":
		c.req.HasModel = true
		if c.kind == kindString {
			c.req.Model = string(c.lastStr)
		}
	case "stream":
		if c.kind == kindBool {
			c.req.Stream = c.boolVal
		}
	case "store":
		c.storeFalse = c.kind == kindBool && !c.boolVal
	case "max_tokens":
		if c.kind == kindNumber && c.intOK {
			c.maxTokens, c.hasMaxTok = c.intVal, true
		}
	case "max_completion_tokens":
		if c.kind == kindNumber && c.intOK {
			c.maxCompl, c.hasMaxCpl = c.intVal, true
		}
	case "n":
		if c.kind == kindNumber && c.intOK && c.intVal > 0 {
			c.req.N = c.intVal
		}
	}
}

// key reads an object key, writes its canonical form and returns the
// decoded key, and where it is as a member records it.
func (c *canon) key() (key []byte, keyStart, keyEnd int, err error) {
	open := c.pos
	s, raw, err := c.scanString()
	if err != nil {
		return nil, 0, 0, err
	}
	if raw {
		c.out = append(c.out, c.in[open:c.pos]...)
		return s, open + 1, c.pos - 1, nil
	}
	c.out = appendString(c.out, s)
	n := len(c.keys)
	c.keys = append(c.keys, s...)
	return c.keys[n:], ^n, len(c.keys), nil
}

func (c *canon) stringValue(r role) error {
	open := c.pos
	s, raw, err := c.scanString()
	if err != nil {
		return err
	}
	c.kind, c.lastStr = kindString, s
	switch r {
	case roleContent, roleText:
		t := bytes.TrimSpace(s)
		if raw {
			c.out = append(c.out, '"')
			c.out = append(c.out, t...)
			c.out = append(c.out, '"')
		} else {
			c.out = appendString(c.out, t)
		}
		return nil
	}
	if raw {
		c.out = append(c.out, c.in[open:c.pos]...)
	} else {
		c.out = appendString(c.out, s)
	}
	return nil
}

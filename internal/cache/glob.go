package cache

// matchGlob reports whether s matches the Redis glob pattern, with the
// rules of Redis's stringmatchlen (util.c) that SCAN MATCH and KEYS use:
//
//	pattern  matches
//	*        any run of bytes, including none; ':' and '/' too, since
//	         unlike path.Match there is no separator
//	?        exactly one byte
//	[abc]    one byte of the set; [^abc] negates; [a-z] is a range (ends
//	         in either order); \x inside a set is a literal x
//	\x       the literal byte x
//
// Matching is by bytes and case-sensitive, as in Redis. It is a port rather
// than path.Match so that Memory.DeletePattern removes exactly the keys
// Redis.DeletePattern would; TestMatchGlobAgreesWithRedis checks that
// against a real redis-server.
func matchGlob(pattern, s string) bool {
	if pattern == "*" {
		return true // SCAN's own shortcut; it also matches the empty key
	}
	skipLonger := false
	return globMatch(pattern, s, &skipLonger, 0)
}

// globMatch follows stringmatchlen_impl line by line. C reads the NUL
// terminator one past the end of the pattern; at returns 0 there instead.
func globMatch(p, s string, skipLonger *bool, nesting int) bool {
	// Protection against abusive patterns, as in Redis.
	if nesting > 1000 {
		return false
	}
	at := func(i int) byte {
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && at(1) == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if globMatch(p[1:], s, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				s = s[1:]
			}
			// No match for the rest of the pattern from anywhere in the
			// rest of s: earlier stars cannot help either.
			*skipLonger = true
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := at(0) == '^'
			if not {
				p = p[1:]
			}
			match := false
			for {
				if at(0) == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				} else if at(0) == ']' {
					break
				} else if len(p) == 0 {
					// Unterminated set: Redis steps back so that the
					// common p = p[1:] below ends the pattern.
					p = "]"
					break
				} else if len(p) >= 3 && p[1] == '-' {
					start, end := p[0], p[2]
					if start > end {
						start, end = end, start
					}
					p = p[2:]
					if s[0] >= start && s[0] <= end {
						match = true
					}
				} else if p[0] == s[0] {
					match = true
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for at(0) == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// Package yaml parses the subset of YAML that kubeconfig files use,
// strictly, with the meaning of YAML 1.2's core schema.
//
// The subset is what kubectl, client-go and cloud command-line tools write:
// block maps and block lists (list items may sit at the same indentation as
// their key); flow maps {} and lists [], on one line or several, which
// covers JSON, pretty-printed or minified; plain scalars, single-quoted and
// double-quoted scalars, on one line or several, with escapes and line
// folding; literal (|) and folded (>) block scalars with any header
// (chomping - or +, an indentation indicator 1-9, in either order);
// comments. A document may start with "---" and end with "...".
//
// Everything else is an error that names the construct and the line:
// anchors, aliases, tags, directives, several documents, complex keys,
// merge keys (<<), keys over several lines, plain scalars over several lines
// inside a flow collection, tabs used for indentation, duplicate map keys,
// nesting deeper than [MaxDepth] and more than [MaxValues] entries and
// items. The parser never guesses: a document it accepts means what a full
// YAML 1.2 parser would read. Plain scalars keep their text; [Node.IsNull]
// tells the core schema's nulls.
//
// Time and memory are linear in the size of the document.
//
// Errors never quote the document's text, which may hold secrets; they give
// a line number and a description.
//
// Parse is a pure function and safe for concurrent use.
package yaml

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of maps and lists Parse accepts.
const MaxDepth = 64

// MaxValues is the most map entries and list items a document may hold:
// far more than any kubeconfig needs, and it bounds the memory of the
// tree to some tens of megabytes whatever the shape of the text.
const MaxValues = 1 << 18

// Kind is the kind of a [Node].
type Kind uint8

// The kinds of node.
const (
	Scalar Kind = iota + 1
	Map
	List
)

// String returns "scalar", "map" or "list".
func (k Kind) String() string {
	if k < Scalar || k > List {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return [...]string{"scalar", "map", "list"}[k-Scalar]
}

// Node is one value of a document.
type Node struct {
	Kind Kind
	// Line is the 1-based line the value starts on. For an empty value
	// ("key:" with nothing under it) it is the key's line.
	Line int
	// Value is a scalar's text, with quotes removed and escapes decoded.
	Value string
	// Quoted reports that a scalar was single- or double-quoted or a literal
	// block: it is a string, never null, a number or a boolean.
	Quoted bool
	// Entries are a map's entries in document order. Keys are unique.
	Entries []Entry
	// Items are a list's items.
	Items []*Node
}

// Entry is one key and value of a map.
type Entry struct {
	Key string
	// Line is the key's line.
	Line  int
	Value *Node
}

// IsNull reports whether n is a null: nil, an empty value, or a plain
// "~" or "null".
func (n *Node) IsNull() bool {
	return n == nil || n.Kind == Scalar && !n.Quoted && slices.Contains(nulls, n.Value)
}

// nulls are the plain scalars of the core schema that mean null.
var nulls = []string{"", "~", "null", "Null", "NULL"}

// SyntaxError is a document Parse does not accept.
type SyntaxError struct {
	Line int    // 1-based
	Msg  string // never includes the document's text
}

// Error returns "yaml: line N: message".
func (e *SyntaxError) Error() string {
	return "yaml: line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Parse parses one document. An empty document (only blank lines,
// comments and document markers) is a null scalar on line 1.
func Parse(data []byte) (n *Node, err error) {
	// The parser stops at the first error by panicking with a
	// *SyntaxError (see fail), which never leaves the package.
	defer func() {
		switch e := recover().(type) {
		case nil:
		case *SyntaxError:
			n, err = nil, e
		default:
			panic(e)
		}
	}()
	s := strings.ReplaceAll(strings.TrimPrefix(string(data), "\uFEFF"), "\r\n", "\n")
	checkChars(s)
	p := &parser{src: s, num: 1}
	return p.document(), nil
}

// fail stops the parse with a *SyntaxError, which Parse returns.
func fail(line int, format string, args ...any) {
	panic(&SyntaxError{Line: line, Msg: fmt.Sprintf(format, args...)})
}

// line is one line of the document.
type line struct {
	num    int    // 1-based
	end    int    // offset in the source of the line's end: its '\n' or the end
	indent int    // leading spaces
	text   string // the line after its leading spaces; always a suffix of raw
	raw    string // the whole line, without its line break
}

// parser reads the source one line at a time: it keeps no table of lines,
// so memory stays proportional to the document, not to its line count.
type parser struct {
	values int // map entries and list items so far
	src    string
	off    int  // offset of the next line not yet consumed
	num    int  // that line's number
	cur    line // the line at off, when its number is num
	// Inside a flow collection or quoted scalar, off is the offset of the
	// next character, and:
	start     int // the line the outermost collection starts on
	minIndent int // the least indentation of the lines after the first
}

// checkChars rejects invalid UTF-8 and control characters other than tab
// and line feed (a lone carriage return included).
func checkChars(s string) {
	num := 1
	for i, r := range s {
		switch {
		case r == '\n':
			num++
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fail(num, "invalid UTF-8")
		case r < 0x20 && r != '\t', r == 0x7f, r >= 0x80 && r < 0xa0 && r != 0x85, r == '\uFEFF':
			fail(num, "control character U+%04X", r)
		}
	}
}

// lineEnd returns the offset of the end of the line that holds offset
// off: its '\n', or the end of the source.
func (p *parser) lineEnd(off int) int {
	if i := strings.IndexByte(p.src[off:], '\n'); i >= 0 {
		return off + i
	}
	return len(p.src)
}

// line returns the line at the parser's position, or nil at the end.
func (p *parser) line() *line {
	if p.off >= len(p.src) {
		return nil
	}
	if p.cur.num != p.num {
		end := p.lineEnd(p.off)
		raw := p.src[p.off:end]
		t := strings.TrimLeft(raw, " ")
		p.cur = line{num: p.num, end: end, indent: len(raw) - len(t), text: t, raw: raw}
	}
	return &p.cur
}

// next consumes the current line, which line has returned.
func (p *parser) next() {
	p.off, p.num = p.cur.end+1, p.cur.num+1
}

// peek returns the next line that is not blank, or nil at the end.
func (p *parser) peek() *line {
	for l := p.line(); l != nil; l = p.line() {
		if !onlyComment(l.text) {
			if l.text[0] == '\t' {
				fail(l.num, "tab character used for indentation")
			}
			return l
		}
		p.next()
		for p.off < len(p.src) && p.src[p.off] == '\n' {
			p.off++ // an empty line, the quick way
			p.num++
		}
	}
	return nil
}

// count counts one more map entry or list item, on line num.
func (p *parser) count(num int) {
	if p.values++; p.values > MaxValues {
		fail(num, "more than %d map entries and list items in the document", MaxValues)
	}
}

// checkDepth fails when depth, on line num, is deeper than MaxDepth.
func checkDepth(depth, num int) {
	if depth > MaxDepth {
		fail(num, "nesting deeper than %d levels", MaxDepth)
	}
}

// isMarker reports whether s, the start of a line, is a document marker.
func isMarker(s string) bool {
	marker := strings.HasPrefix(s, "---") || strings.HasPrefix(s, "...")
	return marker && (len(s) == 3 || strings.IndexByte(" \t\n", s[3]) >= 0)
}

func isDocMarker(l *line) bool { return l.indent == 0 && isMarker(l.text) }

// onlyComment reports whether s is empty, white space or a comment.
func onlyComment(s string) bool {
	s = strings.TrimLeft(s, " \t")
	return s == "" || s[0] == '#'
}

// spaceOrComment reports whether s, what follows a value on its line, is
// empty, white space, or white space and a comment.
func spaceOrComment(s string) bool {
	return s == "" || spaceAfter(s, -1) && onlyComment(s)
}

// spaceAfter reports whether s ends after s[i] or white space follows it.
func spaceAfter(s string, i int) bool {
	return i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t'
}

func isSeqItem(text string) bool {
	return text[0] == '-' && spaceAfter(text, 0)
}

func null(line int) *Node { return &Node{Kind: Scalar, Line: line} }

func (p *parser) document() *Node {
	l := p.peek()
	if l != nil && l.indent == 0 && l.text[0] == '%' {
		fail(l.num, "directives are not supported")
	}
	if l != nil && isDocMarker(l) && l.text[0] == '-' {
		if !onlyComment(l.text[3:]) {
			fail(l.num, "content on the '---' line is not supported")
		}
		p.next()
	}
	// An empty document is a null, on line 1.
	root := p.indented(-1, false, 1, 1)
	// Only "..." and comments may follow.
	if l = p.peek(); l != nil {
		switch {
		case !isDocMarker(l):
			fail(l.num, "unexpected indentation")
		case l.text[0] == '-':
			fail(l.num, "multiple documents are not supported")
		case !onlyComment(l.text[3:]):
			fail(l.num, "content after '...'")
		}
		p.next()
	}
	if l = p.peek(); l != nil {
		fail(l.num, "content after the end of the document")
	}
	return root
}

// indented parses the value of a key or list item whose own line held
// nothing: the block on the following lines indented more than parent or,
// when sameIndentList is set, a list at parent's indentation (the style
// kubectl writes). It is null when neither follows.
func (p *parser) indented(parent int, sameIndentList bool, depth, lineNum int) *Node {
	l := p.peek()
	switch {
	case l == nil || isDocMarker(l):
	case l.indent > parent || l.indent == parent && sameIndentList && isSeqItem(l.text):
		return p.block(l.indent, parent, depth)
	}
	return null(lineNum)
}

// block parses the node starting on the current line, at indentation
// indent, inside a parent at indentation parent.
func (p *parser) block(indent, parent, depth int) *Node {
	l := *p.line()
	checkDepth(depth, l.num)
	if onlyComment(l.text) {
		// An empty list item: its value is on the following lines.
		p.next()
		return p.indented(parent, false, depth, l.num)
	}
	if isSeqItem(l.text) {
		return p.list(indent, depth)
	}
	if _, _, ok := splitKey(&l); ok {
		return p.mapping(indent, depth)
	}
	// A scalar or flow collection that starts on its own line.
	p.next()
	n := p.inline(l.text, l.end-len(l.text), l.num, parent, depth)
	if next := p.peek(); next != nil && next.indent >= indent && !isDocMarker(next) {
		fail(next.num, "unexpected content after a %s value", n.Kind)
	}
	return n
}

// member returns the next line of a block map or list at indentation
// indent, or nil where the map or list ends.
func (p *parser) member(indent int) *line {
	l := p.peek()
	if l == nil || isDocMarker(l) || l.indent < indent {
		return nil
	}
	if l.indent > indent {
		fail(l.num, "unexpected indentation")
	}
	return l
}

func (p *parser) mapping(indent, depth int) *Node {
	m := &Node{Kind: Map, Line: p.line().num}
	seen := make(map[string]int)
	for l := p.member(indent); l != nil; l = p.member(indent) {
		if isSeqItem(l.text) {
			fail(l.num, "list item where a map key was expected")
		}
		key, rest, ok := splitKey(l)
		if !ok {
			fail(l.num, "expected a map key followed by ': '")
		}
		if first, dup := seen[key]; dup {
			fail(l.num, "duplicate map key (first at line %d)", first)
		}
		seen[key] = l.num
		num, end := l.num, l.end
		p.next()
		t := strings.TrimLeft(rest, " \t")
		v := p.inline(t, end-len(t), num, indent, depth+1)
		p.count(num)
		m.Entries = append(m.Entries, Entry{Key: key, Line: num, Value: v})
	}
	return m
}

func (p *parser) list(indent, depth int) *Node {
	s := &Node{Kind: List, Line: p.line().num}
	// A line that is not an item ends a list written at its key's
	// indentation: the enclosing map goes on, or reports the line.
	for l := p.member(indent); l != nil && isSeqItem(l.text); l = p.member(indent) {
		rest := l.text[1:]
		item := strings.TrimLeft(rest, " \t")
		if strings.ContainsRune(rest[:len(rest)-len(item)], '\t') && !onlyComment(item) {
			fail(l.num, "tab character used for indentation")
		}
		// Read the item as if it were a line of its own, indented to
		// where its text starts, so "- key: v" opens a map whose
		// further keys line up with "key".
		l.indent = indent + 1 + len(rest) - len(item)
		l.text = item
		v := p.block(l.indent, indent, depth+1)
		p.count(v.Line)
		s.Items = append(s.Items, v)
	}
	return s
}

// splitKey reports whether l is a "key: value" line and splits it. rest is
// what follows the colon. A key is on one line: a quoted scalar that goes
// on to the next line is not a key.
func splitKey(l *line) (key, rest string, ok bool) {
	t := l.text
	switch t[0] {
	case '"', '\'':
		v, n, _ := quoted(t, 0, l.num, 0)
		after := strings.TrimLeft(t[max(n, 0):], " \t")
		return v, strings.TrimPrefix(after, ":"), n > 0 && strings.HasPrefix(after, ":") && spaceAfter(after, 0)
	case '?':
		if spaceAfter(t, 0) {
			fail(l.num, "complex keys ('?') are not supported")
		}
	case '[', '{', ']', '}', ',', '&', '*', '!', '|', '>', '%', '@', '`', '#':
		return "", "", false
	}
	i := plainEnd(t, false)
	if i == len(t) || t[i] != ':' {
		return "", "", false
	}
	switch key = strings.TrimRight(t[:i], " \t"); key {
	case "":
		fail(l.num, "empty map key")
	case "<<":
		fail(l.num, "merge keys ('<<') are not supported")
	}
	return key, t[i+1:], true
}

// inline parses a value that starts on its line: t is the text from the
// value's first character, at offset at in the source; when t is empty or
// a comment, the value is on the following lines (see indented). The line
// itself is already consumed. Whatever continues the value on later lines (a block
// scalar's content, a flow collection or quoted scalar that is not closed
// yet, a plain scalar's continuation lines) must be indented more than
// parent.
func (p *parser) inline(t string, at, num, parent, depth int) *Node {
	if onlyComment(t) {
		return p.indented(parent, true, depth, num)
	}
	checkDepth(depth, num)
	switch t[0] {
	case '|', '>':
		return p.blockScalar(t, num, parent)
	case '[', '{', '"', '\'':
		// Only a comment may follow where it ends.
		p.off, p.num, p.start, p.minIndent = at, num, num, parent+1
		n := p.flowValue(depth)
		end := p.lineEnd(p.off)
		if !spaceOrComment(p.src[p.off:end]) {
			fail(p.num, "unexpected text after a %s", [...]string{Scalar: "quoted scalar", Map: "flow collection", List: "flow collection"}[n.Kind])
		}
		p.off, p.num = end+1, p.num+1
		return n
	}
	return p.plain(t, num, parent)
}

// plainEnd returns where the plain scalar at the start of s stops on its
// line: at the line's end, at a comment, or at a ':' that white space or
// the end follows, which makes what comes before it a key. In a flow
// collection (inFlow) it also stops at a flow indicator, and at a ':' that
// one follows.
func plainEnd(s string, inFlow bool) int {
	colonEnds := " \t\n"
	if inFlow {
		colonEnds = " \t\n,[]{}"
	}
	for i := range len(s) {
		switch c := s[i]; {
		case c == '\n', inFlow && strings.IndexByte(",[]{}", c) >= 0,
			c == ':' && (i+1 == len(s) || strings.IndexByte(colonEnds, s[i+1]) >= 0),
			c == '#' && i > 0 && (s[i-1] == ' ' || s[i-1] == '\t'):
			return i
		}
	}
	return len(s)
}

// plain reads a plain scalar whose first line, from its first character,
// is t, on line num, and its continuation lines: the lines after it
// indented more than parent, up to a comment. A line break between two
// lines folds to a space; n empty lines between them give n line feeds.
func (p *parser) plain(t string, num, parent int) *Node {
	indicator(t, num)
	n := &Node{Kind: Scalar, Line: num}
	var b text
	for empty := 0; ; {
		i := plainEnd(t, false)
		switch {
		case i < len(t) && t[i] == ':' && b.Len() == 0:
			fail(num, "unexpected ': ' in a plain scalar (quote the value)")
		case i < len(t) && t[i] == ':':
			fail(num, "unexpected ': ' in a continuation line of a plain scalar (a key under a value that is not a map?)")
		case b.Len() > 0 && empty == 0:
			b.repeat(' ', 1)
		}
		b.repeat('\n', empty)
		b.put(strings.TrimRight(t[:i], " \t"))
		if i < len(t) {
			break // a comment
		}
		l := p.line()
		for empty = 0; l != nil; empty++ {
			if t = strings.TrimLeft(l.text, " \t"); t != "" {
				break
			}
			p.next()
			l = p.line()
		}
		if l == nil || l.indent <= parent || isDocMarker(l) || t[0] == '#' {
			break
		}
		num = l.num
		p.next()
	}
	n.Value = b.String()
	return n
}

// indicator rejects a value starting with an indicator the subset leaves
// out, or with a list item's "- ".
func indicator(t string, num int) {
	switch c := t[0]; {
	case c == '&':
		fail(num, "anchors are not supported")
	case c == '*':
		fail(num, "aliases are not supported")
	case c == '!':
		fail(num, "tags are not supported")
	case c == '%', c == '@', c == '`':
		fail(num, "reserved indicator %q cannot start a plain scalar", c)
	case c == ',', c == ']', c == '}':
		fail(num, "unexpected %q", c)
	case c == '?' && spaceAfter(t, 0):
		fail(num, "complex keys ('?') are not supported")
	case c == ':' && spaceAfter(t, 0):
		fail(num, "unexpected ':'")
	case isSeqItem(t):
		fail(num, "a list item cannot start here")
	}
}

// blockScalar parses a literal (|) or folded (>) block scalar whose header
// is t, on line num, inside a parent at indentation parent.
func (p *parser) blockScalar(t string, num, parent int) *Node {
	folded := t[0] == '>'
	chomp, indent := blockHeader(t[1:], num, parent)
	var b text
	// The line breaks since the last content line, the longest line
	// before the first content line, and whether the last content line is
	// more indented.
	breaks, longest, prevMore := 0, 0, false
	for l := p.line(); l != nil; l = p.line() {
		// A content line; the others are empty lines.
		if strings.Trim(l.raw, " ") != "" || indent >= 0 && len(l.raw) > indent {
			if indent < 0 {
				if longest > l.indent && l.indent > parent {
					fail(l.num-1, "a leading empty line of a block scalar is indented more than its first line")
				}
				if l.indent <= parent || l.indent == 0 {
					break // no content: the scalar is empty
				}
				indent = l.indent
			}
			if l.indent < indent {
				break
			}
			c := l.raw[indent:]
			more := c[0] == ' ' || c[0] == '\t'
			if b.Len() > 0 && folded && !more && !prevMore {
				// A folded line break: a space, or one line feed fewer.
				if breaks--; breaks == 0 {
					b.repeat(' ', 1)
				}
			}
			b.repeat('\n', breaks)
			b.put(c)
			prevMore, breaks = more, 0
		}
		longest = max(longest, len(l.raw))
		if l.end < len(p.src) {
			breaks++
		}
		p.next()
	}
	// Clipping (no indicator) keeps the last content line's break, keeping
	// (+) every break, stripping (-) none.
	switch {
	case chomp == 0 && b.Len() > 0:
		b.repeat('\n', min(breaks, 1))
	case chomp == '+':
		b.repeat('\n', breaks)
	}
	return &Node{Kind: Scalar, Line: num, Value: b.String(), Quoted: true}
}

// blockHeader parses h, the header of a block scalar on line num after
// its | or >, inside a parent at indentation parent. It returns the
// chomping indicator ('-', '+' or 0 for none) and the content's
// indentation: given by the header, relative to the parent, or else -1
// for that of the first line that is not empty.
func blockHeader(h string, num, parent int) (chomp byte, indent int) {
	indent = -1
	for range 2 {
		switch {
		case h == "":
		case (h[0] == '-' || h[0] == '+') && chomp == 0:
			chomp, h = h[0], h[1:]
		case h[0] >= '1' && h[0] <= '9' && indent < 0:
			indent, h = int(h[0]-'0')+max(parent, 0), h[1:]
		case h[0] == '0':
			fail(num, "block scalar indentation indicator 0 is not valid")
		}
	}
	if !spaceOrComment(h) {
		fail(num, "invalid block scalar header")
	}
	return chomp, indent
}

// text builds a scalar's value. It doubles its buffer as it grows, so
// that building a value allocates at most about twice its size.
type text struct{ strings.Builder }

func (b *text) put(s string) {
	b.Grow(len(s)) // when short, to twice the capacity and s
	b.WriteString(s)
}

func (b *text) repeat(c byte, n int) {
	b.Grow(n)
	for ; n > 0; n-- {
		b.WriteByte(c)
	}
}

// quoted parses the single- or double-quoted scalar at s[i:], which starts
// on line num. It may go on over several lines, each indented at least
// minIndent: a line break folds to a space, n empty lines give n line
// feeds, and white space around a line break is dropped. It returns the
// value, the offset after the closing quote and that offset's line; the
// offset is -1 when s ends before the closing quote.
func quoted(s string, i, num, minIndent int) (string, int, int) {
	q := s[i]
	var b text
	for j, n := i+1, num; j < len(s); {
		c := s[j]
		// An escaped line break joins the lines with nothing between.
		escapedBreak := c == '\\' && q == '"' && strings.HasPrefix(s[j+1:], "\n")
		switch {
		case c == ' ' || c == '\t' || c == '\n' || escapedBreak:
			// White space, line breaks and empty lines: a line break folds
			// to a space, n empty lines give n line feeds, and white space
			// around a line break is dropped.
			k := len(s) - len(strings.TrimLeft(s[j+1:], " \t\n"))
			if k == len(s) {
				return "", -1, 0
			}
			breaks := strings.Count(s[j:k], "\n")
			if n += breaks; breaks > 0 {
				lineIn(s[j+strings.LastIndexByte(s[j:k], '\n')+1:], n, minIndent, "quoted scalar")
			}
			switch {
			case breaks == 0:
				b.put(s[j:k])
			case breaks == 1 && !escapedBreak:
				b.repeat(' ', 1)
			default:
				b.repeat('\n', breaks-1)
			}
			j = k
		case c == q && q == '\'' && strings.HasPrefix(s[j+1:], "'"):
			b.put("'")
			j += 2
		case c == q:
			return b.String(), j + 1, n
		case c == '\\' && q == '"' && j+1 < len(s):
			// (A backslash that ends the text is the default's: the
			// scalar is not closed.)
			j += 1 + escape(&b, s[j+1:], n)
		default:
			// A run of ordinary characters, up to the next one of the cases.
			k := j + 1 + strings.IndexAny(s[j+1:], " \t\n\\'\"")
			if k == j {
				k = len(s) // none: unterminated
			}
			b.put(s[j:k])
			j = k
		}
	}
	return "", -1, 0
}

// lineIn fails when s, a line inside a quoted scalar or flow collection
// (what) that is not blank, on line num, is a document marker or is
// indented less than minIndent.
func lineIn(s string, num, minIndent int, what string) {
	if isMarker(s) {
		fail(num, "a document marker inside a %s", what)
	}
	if len(s)-len(strings.TrimLeft(s, " ")) < minIndent {
		fail(num, "a line of a %s is indented too little (it must be indented more than its key)", what)
	}
}

// escapeChars are the characters that follow a backslash in the escapes
// of one character; escapeRunes, at the same index, what they stand for.
const escapeChars = "0abt\tnvfre \"/\\N_LP"

var escapeRunes = []rune("\x00\a\b\t\t\n\v\f\r\x1b \"/\\\u0085\u00a0\u2028\u2029")

// hexDigits maps the character after a backslash to the number of hex
// digits of the code point that follows.
var hexDigits = map[byte]int{'x': 2, 'u': 4, 'U': 8}

// escape decodes the escape sequence at the start of s (after the
// backslash), appends it to b and returns its length.
func escape(b *text, s string, num int) int {
	if i := strings.IndexByte(escapeChars, s[0]); i >= 0 {
		b.put(string(escapeRunes[i]))
		return 1
	}
	digits := hexDigits[s[0]]
	if digits == 0 {
		fail(num, "invalid escape sequence in a double-quoted scalar")
	}
	v, err := strconv.ParseUint(s[1:min(1+digits, len(s))], 16, 32)
	if err != nil || len(s) < 1+digits || !utf8.ValidRune(rune(v)) {
		fail(num, "invalid \\%c escape in a double-quoted scalar", s[0])
	}
	b.put(string(rune(v)))
	return 1 + digits
}

// more skips white space, line breaks and comments, and fails when the
// text ends before the collection does. Each line it enters must be
// indented at least minIndent and must not be a document marker.
func (p *parser) more() {
	for ; p.off < len(p.src); p.off++ {
		switch c := p.src[p.off]; {
		case c == '#' && (p.off == 0 || strings.IndexByte(" \t\n", p.src[p.off-1]) >= 0):
			p.off = p.lineEnd(p.off) - 1
		case c == '\n':
			p.num++
			if t := strings.TrimLeft(p.src[p.off+1:], " \t"); t != "" && t[0] != '\n' && t[0] != '#' {
				lineIn(p.src[p.off+1:], p.num, p.minIndent, "flow collection")
			}
		case c != ' ' && c != '\t':
			return
		}
	}
	fail(p.start, "flow collection not closed before the end of the document")
}

func (p *parser) flowValue(depth int) *Node {
	checkDepth(depth, p.num)
	p.more()
	switch c := p.src[p.off]; c {
	case '[', '{':
		return p.collection(depth)
	case '"', '\'':
		n := &Node{Kind: Scalar, Line: p.num, Quoted: true}
		n.Value, p.off, p.num = quoted(p.src, p.off, p.num, p.minIndent)
		if p.off < 0 {
			fail(n.Line, "unterminated %s-quoted scalar", map[byte]string{'"': "double", '\'': "single"}[c])
		}
		return n
	case ',', ']', '}', '#':
		fail(p.num, "expected a value in a flow collection")
	case '|', '>':
		fail(p.num, "block scalars cannot appear in a flow collection")
	}
	indicator(p.src[p.off:], p.num)
	start := p.off
	p.off += plainEnd(p.src[p.off:], true)
	return &Node{Kind: Scalar, Line: p.num, Value: strings.TrimRight(p.src[start:p.off], " \t")}
}

// collection parses the flow list or map that starts at src[off].
func (p *parser) collection(depth int) *Node {
	n := &Node{Kind: List, Line: p.num}
	end := byte(']')
	var seen map[string]bool
	if p.src[p.off] == '{' {
		n.Kind, end, seen = Map, '}', make(map[string]bool)
	}
	p.off++
	for p.more(); p.src[p.off] != end; p.more() {
		num := p.num
		v := p.flowValue(depth + 1)
		if n.Kind == Map {
			v = p.flowEntry(n, v, num, seen, depth)
		} else {
			n.Items = append(n.Items, v)
		}
		p.count(num)
		p.more()
		switch c := p.src[p.off]; {
		case c == ',':
			p.off++
		case c == end:
		case c == ':' && n.Kind == List:
			fail(p.num, "key: value pairs in a flow list are not supported")
		case strings.IndexByte(",]}:", c) < 0 && p.num > v.Line && v.Kind == Scalar && !v.Quoted:
			// A plain scalar that ends with its line must end with a
			// flow indicator.
			fail(v.Line, "plain scalars over several lines are not supported in a flow collection (quote the value)")
		default:
			fail(p.num, "expected ',' or '%c' in a flow %s", end, n.Kind)
		}
	}
	p.off++
	return n
}

// flowEntry reads the rest of an entry of flow map m whose key k, on line num,
// has been read, adds it to m and returns its value. seen holds m's keys.
func (p *parser) flowEntry(m, k *Node, num int, seen map[string]bool, depth int) *Node {
	// The ':' is on the key's line.
	p.off = len(p.src) - len(strings.TrimLeft(p.src[p.off:], " \t"))
	switch {
	case k.Kind != Scalar:
		fail(num, "map keys must be scalars")
	case p.num != num:
		fail(num, "a map key must be on one line")
	case !k.Quoted && k.Value == "<<":
		fail(num, "merge keys ('<<') are not supported")
	case !strings.HasPrefix(p.src[p.off:], ":"):
		fail(num, "expected ':' after a key in a flow map")
	case seen[k.Value]:
		fail(num, "duplicate map key")
	}
	seen[k.Value] = true
	p.off++
	p.more()
	v := null(num)
	if c := p.src[p.off]; c != ',' && c != '}' {
		v = p.flowValue(depth + 1)
	}
	m.Entries = append(m.Entries, Entry{Key: k.Value, Line: num, Value: v})
	return v
}

// Package yaml parses the small subset of YAML that kubeconfig files use,
// strictly.
//
// The subset is what kubectl and cloud command-line tools write: block maps
// and block lists (list items may sit at the same indentation as their key),
// single-line flow maps {} and lists [], plain, single-quoted and
// double-quoted scalars, comments, and literal block scalars (| with the -
// and + chomping indicators). A document may start with "---" and end with
// "...".
//
// Everything else is an error that names the line: anchors, aliases, tags,
// directives, several documents, folded block scalars (>), explicit
// indentation indicators, complex keys, merge keys (<<), multi-line plain,
// quoted or flow scalars, tabs used for indentation, duplicate map keys and
// nesting deeper than [MaxDepth]. The parser never guesses: a document it accepts means what
// a full YAML parser would read.
//
// Errors never quote the document's text, which may hold secrets; they give
// a line number and a description.
//
// Parse is a pure function and safe for concurrent use.
package yaml

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of maps and lists Parse accepts.
const MaxDepth = 64

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
	switch k {
	case Scalar:
		return "scalar"
	case Map:
		return "map"
	case List:
		return "list"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
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
	if n == nil {
		return true
	}
	if n.Kind != Scalar || n.Quoted {
		return false
	}
	switch n.Value {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// Get returns the value of key in map n, or nil when n is not a map or has
// no such key.
func (n *Node) Get(key string) *Node {
	if n == nil || n.Kind != Map {
		return nil
	}
	for i := range n.Entries {
		if n.Entries[i].Key == key {
			return n.Entries[i].Value
		}
	}
	return nil
}

// SyntaxError is a document Parse does not accept.
type SyntaxError struct {
	Line int    // 1-based
	Msg  string // never includes the document's text
}

// Error returns "yaml: line N: message".
func (e *SyntaxError) Error() string {
	return "yaml: line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Parse parses one document. An empty document (only blank lines and
// comments) is a null scalar.
func Parse(data []byte) (*Node, error) {
	p, err := newParser(data)
	if err != nil {
		return nil, err
	}
	return p.document()
}

type line struct {
	num    int    // 1-based
	indent int    // leading spaces
	text   string // the line after its leading spaces
	raw    string // the whole line, without its line break
}

type parser struct {
	lines []line
	pos   int
}

func errorf(line int, format string, args ...any) error {
	return &SyntaxError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

func newParser(data []byte) (*parser, error) {
	s := string(data)
	s = strings.TrimPrefix(s, "\uFEFF")
	p := &parser{}
	num := 0
	for len(s) > 0 {
		num++
		var raw string
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			raw, s = s[:i], s[i+1:]
		} else {
			raw, s = s, ""
		}
		raw = strings.TrimSuffix(raw, "\r")
		if !utf8.ValidString(raw) {
			return nil, errorf(num, "invalid UTF-8")
		}
		for _, r := range raw {
			if r == '\t' {
				continue
			}
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0 && r != 0x85) || r == '\uFEFF' {
				return nil, errorf(num, "control character U+%04X", r)
			}
		}
		t := strings.TrimLeft(raw, " ")
		p.lines = append(p.lines, line{num: num, indent: len(raw) - len(t), text: t, raw: raw})
	}
	return p, nil
}

// blank reports whether l holds only white space or a comment.
func blank(l *line) bool {
	t := strings.TrimLeft(l.text, " \t")
	return t == "" || t[0] == '#'
}

// peek returns the next line that is not blank, or nil at the end.
func (p *parser) peek() (*line, error) {
	for p.pos < len(p.lines) {
		l := &p.lines[p.pos]
		if blank(l) {
			p.pos++
			continue
		}
		if l.text[0] == '\t' {
			return nil, errorf(l.num, "tab character used for indentation")
		}
		return l, nil
	}
	return nil, nil
}

func isDocMarker(l *line) bool {
	if l.indent != 0 {
		return false
	}
	for _, m := range []string{"---", "..."} {
		if l.text == m || strings.HasPrefix(l.text, m+" ") || strings.HasPrefix(l.text, m+"\t") {
			return true
		}
	}
	return false
}

// onlyComment reports whether s is empty, white space or a comment.
func onlyComment(s string) bool {
	s = strings.TrimLeft(s, " \t")
	return s == "" || s[0] == '#'
}

func isSeqItem(text string) bool {
	return text == "-" || strings.HasPrefix(text, "- ") || strings.HasPrefix(text, "-\t")
}

func null(line int) *Node { return &Node{Kind: Scalar, Line: line} }

func (p *parser) document() (*Node, error) {
	l, err := p.peek()
	if err != nil {
		return nil, err
	}
	if l != nil && l.indent == 0 && l.text[0] == '%' {
		return nil, errorf(l.num, "directives are not supported")
	}
	if l != nil && isDocMarker(l) && strings.HasPrefix(l.text, "---") {
		if !onlyComment(l.text[3:]) {
			return nil, errorf(l.num, "content on the '---' line is not supported")
		}
		p.pos++
		if l, err = p.peek(); err != nil {
			return nil, err
		}
	}
	var root *Node
	switch {
	case l == nil:
		root = null(1)
	case isDocMarker(l):
		root = null(l.num)
	default:
		if root, err = p.block(l.indent, -1, 1); err != nil {
			return nil, err
		}
	}
	l, err = p.peek()
	if err != nil || l == nil {
		return root, err
	}
	if !isDocMarker(l) {
		return nil, errorf(l.num, "unexpected indentation")
	}
	if strings.HasPrefix(l.text, "---") {
		return nil, errorf(l.num, "multiple documents are not supported")
	}
	if !onlyComment(l.text[3:]) {
		return nil, errorf(l.num, "content after '...'")
	}
	p.pos++
	if l, err = p.peek(); err != nil {
		return nil, err
	}
	if l != nil {
		return nil, errorf(l.num, "content after the end of the document")
	}
	return root, nil
}

// indented parses the value of a key or list item whose own line held
// nothing: the block on the following lines indented more than parent or,
// when sameIndentList is set, a list at parent's indentation (the style
// kubectl writes). It is null when neither follows.
func (p *parser) indented(parent int, sameIndentList bool, depth, lineNum int) (*Node, error) {
	l, err := p.peek()
	if err != nil {
		return nil, err
	}
	if l == nil || isDocMarker(l) {
		return null(lineNum), nil
	}
	if l.indent > parent {
		return p.block(l.indent, parent, depth)
	}
	if l.indent == parent && sameIndentList && isSeqItem(l.text) {
		return p.list(parent, depth)
	}
	return null(lineNum), nil
}

// block parses the node starting on the current line, at indentation
// indent, inside a parent at indentation parent.
func (p *parser) block(indent, parent, depth int) (*Node, error) {
	l := &p.lines[p.pos]
	if depth > MaxDepth {
		return nil, errorf(l.num, "nesting deeper than %d levels", MaxDepth)
	}
	if isSeqItem(l.text) {
		return p.list(indent, depth)
	}
	if _, _, ok, err := splitKey(l); err != nil {
		return nil, err
	} else if ok {
		return p.mapping(indent, depth)
	}
	// A scalar or flow collection alone on its line.
	p.pos++
	n, err := p.inline(l.text, l.num, parent, depth)
	if err != nil {
		return nil, err
	}
	next, err := p.peek()
	if err != nil {
		return nil, err
	}
	if next != nil && next.indent >= indent && !isDocMarker(next) {
		return nil, errorf(next.num, "unexpected content after a value (multi-line plain scalars are not supported)")
	}
	return n, nil
}

func (p *parser) mapping(indent, depth int) (*Node, error) {
	m := &Node{Kind: Map, Line: p.lines[p.pos].num}
	seen := make(map[string]int)
	for {
		l, err := p.peek()
		if err != nil {
			return nil, err
		}
		if l == nil || isDocMarker(l) || l.indent < indent {
			return m, nil
		}
		if l.indent > indent {
			return nil, errorf(l.num, "unexpected indentation")
		}
		if isSeqItem(l.text) {
			return nil, errorf(l.num, "list item where a map key was expected")
		}
		key, rest, ok, err := splitKey(l)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errorf(l.num, "expected a map key followed by ': '")
		}
		if first, dup := seen[key]; dup {
			return nil, errorf(l.num, "duplicate map key (first at line %d)", first)
		}
		seen[key] = l.num
		p.pos++
		var v *Node
		if onlyComment(rest) {
			v, err = p.indented(indent, true, depth+1, l.num)
		} else {
			v, err = p.inline(strings.TrimLeft(rest, " \t"), l.num, indent, depth+1)
		}
		if err != nil {
			return nil, err
		}
		m.Entries = append(m.Entries, Entry{Key: key, Line: l.num, Value: v})
	}
}

func (p *parser) list(indent, depth int) (*Node, error) {
	s := &Node{Kind: List, Line: p.lines[p.pos].num}
	for {
		l, err := p.peek()
		if err != nil {
			return nil, err
		}
		if l == nil || isDocMarker(l) || l.indent < indent {
			return s, nil
		}
		if l.indent > indent {
			return nil, errorf(l.num, "unexpected indentation")
		}
		if !isSeqItem(l.text) {
			// The end of a list written at its key's indentation; the
			// enclosing map goes on, or reports the line.
			return s, nil
		}
		if depth+1 > MaxDepth {
			return nil, errorf(l.num, "nesting deeper than %d levels", MaxDepth)
		}
		rest := l.text[1:]
		item := strings.TrimLeft(rest, " \t")
		var v *Node
		if onlyComment(item) {
			p.pos++
			v, err = p.indented(indent, false, depth+1, l.num)
		} else {
			if strings.ContainsRune(rest[:len(rest)-len(item)], '\t') {
				return nil, errorf(l.num, "tab character used for indentation")
			}
			// Read the item as if it were a line of its own, indented to
			// where its text starts, so "- key: v" opens a map whose
			// further keys line up with "key".
			col := indent + 1 + len(rest) - len(item)
			p.lines[p.pos] = line{num: l.num, indent: col, text: item, raw: l.raw}
			v, err = p.block(col, indent, depth+1)
		}
		if err != nil {
			return nil, err
		}
		s.Items = append(s.Items, v)
	}
}

// splitKey reports whether l is a "key: value" line and splits it. rest is
// what follows the colon.
func splitKey(l *line) (key, rest string, ok bool, err error) {
	t := l.text
	switch t[0] {
	case '"', '\'':
		v, n, err := quoted(t, 0, l.num)
		if err != nil {
			return "", "", false, err
		}
		after := strings.TrimLeft(t[n:], " \t")
		if strings.HasPrefix(after, ":") && (len(after) == 1 || after[1] == ' ' || after[1] == '\t') {
			return v, after[1:], true, nil
		}
		return "", "", false, nil
	case '?':
		if len(t) == 1 || t[1] == ' ' || t[1] == '\t' {
			return "", "", false, errorf(l.num, "complex keys ('?') are not supported")
		}
	case '[', '{', '&', '*', '!', '|', '>', '%', '@', '`', '#':
		return "", "", false, nil
	}
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '#':
			if i > 0 && (t[i-1] == ' ' || t[i-1] == '\t') {
				return "", "", false, nil
			}
		case ':':
			if i+1 == len(t) || t[i+1] == ' ' || t[i+1] == '\t' {
				key = strings.TrimRight(t[:i], " \t")
				if key == "" {
					return "", "", false, errorf(l.num, "empty map key")
				}
				if key == "<<" {
					return "", "", false, errorf(l.num, "merge keys ('<<') are not supported")
				}
				return key, t[i+1:], true, nil
			}
		}
	}
	return "", "", false, nil
}

// inline parses a value that starts on its line: t is the text from the
// value's first character. The line itself is already consumed; a literal
// block reads the lines after it, which must be indented more than parent.
func (p *parser) inline(t string, num, parent, depth int) (*Node, error) {
	if depth > MaxDepth {
		return nil, errorf(num, "nesting deeper than %d levels", MaxDepth)
	}
	switch t[0] {
	case '|':
		return p.literal(t, num, parent)
	case '[', '{':
		f := flow{s: t, line: num}
		n, err := f.value(depth)
		if err != nil {
			return nil, err
		}
		if !onlyComment(t[f.i:]) || (f.i < len(t) && t[f.i] == '#') {
			return nil, errorf(num, "unexpected text after a flow collection")
		}
		return n, nil
	case '"', '\'':
		v, n, err := quoted(t, 0, num)
		if err != nil {
			return nil, err
		}
		if !onlyComment(t[n:]) || (n < len(t) && t[n] == '#') {
			return nil, errorf(num, "unexpected text after a quoted scalar")
		}
		return &Node{Kind: Scalar, Line: num, Value: v, Quoted: true}, nil
	}
	if err := indicator(t, num); err != nil {
		return nil, err
	}
	if isSeqItem(t) {
		return nil, errorf(num, "a list item cannot start here")
	}
	v := t
	for i := 1; i < len(t); i++ {
		if t[i] == '#' && (t[i-1] == ' ' || t[i-1] == '\t') {
			v = t[:i]
			break
		}
	}
	v = strings.TrimRight(v, " \t")
	if strings.Contains(v, ": ") || strings.Contains(v, ":\t") || strings.HasSuffix(v, ":") {
		return nil, errorf(num, "unexpected ': ' in a plain scalar (quote the value)")
	}
	return &Node{Kind: Scalar, Line: num, Value: v}, nil
}

// indicator rejects a value starting with an indicator the subset leaves out.
func indicator(t string, num int) error {
	switch t[0] {
	case '&':
		return errorf(num, "anchors are not supported")
	case '*':
		return errorf(num, "aliases are not supported")
	case '!':
		return errorf(num, "tags are not supported")
	case '>':
		return errorf(num, "folded block scalars ('>') are not supported; use '|'")
	case '|':
		return errorf(num, "a literal block cannot start here")
	case '%', '@', '`':
		return errorf(num, "reserved indicator %q cannot start a plain scalar", t[0])
	case ',', ']', '}':
		return errorf(num, "unexpected %q", t[0])
	case '?':
		if len(t) == 1 || t[1] == ' ' || t[1] == '\t' {
			return errorf(num, "complex keys ('?') are not supported")
		}
	case ':':
		if len(t) == 1 || t[1] == ' ' || t[1] == '\t' {
			return errorf(num, "unexpected ':'")
		}
	}
	return nil
}

// literal parses a literal block scalar whose header is t.
func (p *parser) literal(t string, num, parent int) (*Node, error) {
	chomp := byte(0)
	h := t[1:]
	if len(h) > 0 && (h[0] == '-' || h[0] == '+') {
		chomp, h = h[0], h[1:]
	}
	if len(h) > 0 && h[0] >= '0' && h[0] <= '9' {
		return nil, errorf(num, "explicit indentation indicators on literal blocks are not supported")
	}
	if len(h) > 0 && h[0] != ' ' && h[0] != '\t' || !onlyComment(h) {
		return nil, errorf(num, "invalid literal block header")
	}
	// The block's indentation is that of its first non-empty line.
	indent := -1
	for i := p.pos; i < len(p.lines); i++ {
		l := &p.lines[i]
		if strings.Trim(l.raw, " ") != "" {
			indent = l.indent
			break
		}
	}
	var content []string
	if indent > parent && indent > 0 {
		for i := p.pos; i < len(p.lines) && p.lines[i].indent != indent; i++ {
			if len(p.lines[i].raw) > indent {
				return nil, errorf(p.lines[i].num, "a leading empty line of a literal block is indented more than its first line")
			}
		}
		for p.pos < len(p.lines) {
			l := &p.lines[p.pos]
			if strings.Trim(l.raw, " ") == "" {
				if len(l.raw) > indent {
					content = append(content, l.raw[indent:])
				} else {
					content = append(content, "")
				}
				p.pos++
				continue
			}
			if l.indent < indent {
				break
			}
			content = append(content, l.raw[indent:])
			p.pos++
		}
	}
	last := len(content) - 1
	for last >= 0 && content[last] == "" {
		last--
	}
	trailing := len(content) - 1 - last
	var b strings.Builder
	for i := 0; i <= last; i++ {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(content[i])
	}
	switch chomp {
	case 0:
		if last >= 0 {
			b.WriteByte('\n')
		}
	case '+':
		if last >= 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat("\n", trailing))
	}
	return &Node{Kind: Scalar, Line: num, Value: b.String(), Quoted: true}, nil
}

// quoted parses the single- or double-quoted scalar at s[i:] and returns its
// value and the index after the closing quote.
func quoted(s string, i, num int) (string, int, error) {
	q := s[i]
	var b strings.Builder
	for j := i + 1; j < len(s); {
		c := s[j]
		if q == '\'' {
			if c == '\'' {
				if j+1 < len(s) && s[j+1] == '\'' {
					b.WriteByte('\'')
					j += 2
					continue
				}
				return b.String(), j + 1, nil
			}
			b.WriteByte(c)
			j++
			continue
		}
		switch c {
		case '"':
			return b.String(), j + 1, nil
		case '\\':
			n, err := escape(&b, s[j+1:], num)
			if err != nil {
				return "", 0, err
			}
			j += 1 + n
		default:
			b.WriteByte(c)
			j++
		}
	}
	if q == '\'' {
		return "", 0, errorf(num, "unterminated single-quoted scalar (multi-line quoted scalars are not supported)")
	}
	return "", 0, errorf(num, "unterminated double-quoted scalar (multi-line quoted scalars are not supported)")
}

// escape decodes the escape sequence at the start of s (after the
// backslash) and returns its length.
func escape(b *strings.Builder, s string, num int) (int, error) {
	if s == "" {
		return 0, errorf(num, "unterminated double-quoted scalar (multi-line quoted scalars are not supported)")
	}
	simple := map[byte]string{
		'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n",
		'v': "\v", 'f': "\f", 'r': "\r", 'e': "\x1b", ' ': " ", '"': "\"",
		'/': "/", '\\': "\\", 'N': "\u0085", '_': "\u00a0", 'L': "\u2028",
		'P': "\u2029",
	}
	if r, ok := simple[s[0]]; ok {
		b.WriteString(r)
		return 1, nil
	}
	digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[0]]
	if digits == 0 {
		return 0, errorf(num, "invalid escape sequence in a double-quoted scalar")
	}
	if len(s) < 1+digits {
		return 0, errorf(num, "short \\%c escape in a double-quoted scalar", s[0])
	}
	v, err := strconv.ParseUint(s[1:1+digits], 16, 32)
	if err != nil || !utf8.ValidRune(rune(v)) {
		return 0, errorf(num, "invalid \\%c escape in a double-quoted scalar", s[0])
	}
	b.WriteRune(rune(v))
	return 1 + digits, nil
}

// flow parses a flow collection that must end on its line.
type flow struct {
	s    string
	i    int
	line int
}

func (f *flow) space() {
	for f.i < len(f.s) && (f.s[f.i] == ' ' || f.s[f.i] == '\t') {
		f.i++
	}
}

// more reports whether the collection goes on; a comment or the end of the
// line before its closing bracket is an error.
func (f *flow) more() error {
	f.space()
	if f.i == len(f.s) || f.s[f.i] == '#' {
		return errorf(f.line, "flow collection not closed on its line (multi-line flow collections are not supported)")
	}
	return nil
}

func (f *flow) value(depth int) (*Node, error) {
	if depth > MaxDepth {
		return nil, errorf(f.line, "nesting deeper than %d levels", MaxDepth)
	}
	if err := f.more(); err != nil {
		return nil, err
	}
	switch c := f.s[f.i]; c {
	case '[':
		return f.list(depth)
	case '{':
		return f.mapping(depth)
	case '"', '\'':
		v, n, err := quoted(f.s, f.i, f.line)
		if err != nil {
			return nil, err
		}
		f.i = n
		return &Node{Kind: Scalar, Line: f.line, Value: v, Quoted: true}, nil
	case ',', ']', '}', '#':
		return nil, errorf(f.line, "expected a value in a flow collection")
	case '|':
		return nil, errorf(f.line, "literal blocks cannot appear in a flow collection")
	}
	if err := indicator(f.s[f.i:], f.line); err != nil {
		return nil, err
	}
	if isSeqItem(f.s[f.i:]) {
		return nil, errorf(f.line, "a list item cannot start here")
	}
	start := f.i
	for f.i < len(f.s) {
		c := f.s[f.i]
		if c == ',' || c == '[' || c == ']' || c == '{' || c == '}' {
			break
		}
		if c == ':' && (f.i+1 == len(f.s) || strings.IndexByte(" \t,[]{}", f.s[f.i+1]) >= 0) {
			break
		}
		if c == '#' && (f.s[f.i-1] == ' ' || f.s[f.i-1] == '\t') {
			break
		}
		f.i++
	}
	v := strings.TrimRight(f.s[start:f.i], " \t")
	return &Node{Kind: Scalar, Line: f.line, Value: v}, nil
}

func (f *flow) list(depth int) (*Node, error) {
	n := &Node{Kind: List, Line: f.line}
	f.i++ // [
	for {
		if err := f.more(); err != nil {
			return nil, err
		}
		if f.s[f.i] == ']' {
			f.i++
			return n, nil
		}
		v, err := f.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.Items = append(n.Items, v)
		if err := f.more(); err != nil {
			return nil, err
		}
		switch f.s[f.i] {
		case ',':
			f.i++
		case ']':
		case ':':
			return nil, errorf(f.line, "key: value pairs in a flow list are not supported")
		default:
			return nil, errorf(f.line, "expected ',' or ']' in a flow list")
		}
	}
}

func (f *flow) mapping(depth int) (*Node, error) {
	n := &Node{Kind: Map, Line: f.line}
	f.i++ // {
	for {
		if err := f.more(); err != nil {
			return nil, err
		}
		if f.s[f.i] == '}' {
			f.i++
			return n, nil
		}
		k, err := f.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if k.Kind != Scalar {
			return nil, errorf(f.line, "map keys must be scalars")
		}
		if !k.Quoted && k.Value == "<<" {
			return nil, errorf(f.line, "merge keys ('<<') are not supported")
		}
		if err := f.more(); err != nil {
			return nil, err
		}
		if f.s[f.i] != ':' {
			return nil, errorf(f.line, "expected ':' after a key in a flow map")
		}
		f.i++
		for _, e := range n.Entries {
			if e.Key == k.Value {
				return nil, errorf(f.line, "duplicate map key")
			}
		}
		if err := f.more(); err != nil {
			return nil, err
		}
		v := null(f.line)
		if c := f.s[f.i]; c != ',' && c != '}' {
			if v, err = f.value(depth + 1); err != nil {
				return nil, err
			}
		}
		n.Entries = append(n.Entries, Entry{Key: k.Value, Line: f.line, Value: v})
		if err := f.more(); err != nil {
			return nil, err
		}
		switch f.s[f.i] {
		case ',':
			f.i++
		case '}':
		default:
			return nil, errorf(f.line, "expected ',' or '}' in a flow map")
		}
	}
}

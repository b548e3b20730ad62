package yaml

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// render writes n compactly: maps as {k=v,...}, lists as [a,b], plain
// scalars bare, quoted ones Go-quoted, nulls as ~.
func render(n *Node) string {
	var b strings.Builder
	var walk func(n *Node)
	walk = func(n *Node) {
		switch {
		case n.Kind == Map:
			b.WriteByte('{')
			for i, e := range n.Entries {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(e.Key + "=")
				walk(e.Value)
			}
			b.WriteByte('}')
		case n.Kind == List:
			b.WriteByte('[')
			for i, it := range n.Items {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(it)
			}
			b.WriteByte(']')
		case n.IsNull():
			b.WriteByte('~')
		case n.Quoted:
			b.WriteString(strconv.Quote(n.Value))
		default:
			b.WriteString(n.Value)
		}
	}
	walk(n)
	return b.String()
}

func TestParseGood(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"empty", "", "~"},
		{"only comments", "# a\n\n  # b\n", "~"},
		{"doc start", "---\na: b\n", "{a=b}"},
		{"doc start and end", "--- # x\na: b\n...\n", "{a=b}"},
		{"plain map", "a: b\nc: d e  \n", "{a=b,c=d e}"},
		{"nested", "a:\n  b:\n    c: d\n  e: f\ng: h\n", "{a={b={c=d},e=f},g=h}"},
		{"comments", "a: b # c\n# d\ne: f#g\n", "{a=b,e=f#g}"},
		{"null values", "a:\nb: ~\nc: null\nd: \"\"\n", "{a=~,b=~,c=~,d=\"\"}"},
		{"indented list", "a:\n  - x\n  - y\n", "{a=[x,y]}"},
		{"kubectl list", "a:\n- x\n- y\nb: z\n", "{a=[x,y],b=z}"},
		{"list of maps", "a:\n- name: n\n  v:\n    k: 1\n- name: m\n", "{a=[{name=n,v={k=1}},{name=m}]}"},
		{"list of maps indented", "a:\n  - name: n\n    x: y\n", "{a=[{name=n,x=y}]}"},
		{"kubectl list in list item", "- name: n\n  args:\n  - a\n  - b\n- name: m\n", "[{name=n,args=[a,b]},{name=m}]"},
		{"nested lists", "- - a\n  - b\n- c\n", "[[a,b],c]"},
		{"empty item", "-\n- a\n-\n", "[~,a,~]"},
		{"item on next line", "-\n  a: b\n", "[{a=b}]"},
		{"quoted", "a: 'it''s'\nb: \"x\\ty\\u00e9\\\"\"\n", "{a=\"it's\",b=\"x\\tyé\\\"\"}"},
		{"quoted keys", "\"a b\": 1\n'c': 2\n", "{a b=1,c=2}"},
		{"quoted merge key", "\"<<\": 1\n", "{<<=1}"},
		{"quoted hash", "a: \"#x\" # c\n", "{a=\"#x\"}"},
		{"flow list", "a: [x, \"y\", 'z', ]\nb: []\n", "{a=[x,\"y\",\"z\"],b=[]}"},
		{"flow map", "a: {x: 1, \"y\":2, z: [a, {b: c}]}\nb: {}\n", "{a={x=1,y=2,z=[a,{b=c}]},b={}}"},
		{"flow null value", "a: {x: , y}\n", ""},
		{"url", "server: https://h:6443/p?q=1\n", "{server=https://h:6443/p?q=1}"},
		{"colon in plain", "a: b:c\n", "{a=b:c}"},
		{"literal", "a: |\n  line1\n\n    line2\nb: x\n", "{a=\"line1\\n\\n  line2\\n\",b=x}"},
		{"literal strip", "a: |-\n  x\n  y\n\n", "{a=\"x\\ny\"}"},
		{"literal keep", "a: |+\n  x\n\n\nb: 1\n", "{a=\"x\\n\\n\\n\",b=1}"},
		{"literal empty", "a: |\nb: 1\n", "{a=\"\",b=1}"},
		{"literal in list", "- |\n  x\n- y\n", "[\"x\\n\",y]"},
		{"literal with hash", "a: | # c\n  # not a comment\n", "{a=\"# not a comment\\n\"}"},
		{"scalar on next line", "a:\n  \"v\"\nb: c\n", "{a=\"v\",b=c}"},
		{"top scalar", "hello\n", "hello"},
		{"crlf", "a: b\r\nc:\r\n- d\r\n", "{a=b,c=[d]}"},
		{"bom", "\uFEFFa: b\n", "{a=b}"},
		{"tab after value", "a:\tb\n", "{a=b}"},
		{"tab in literal", "a: |\n  \tx\n", "{a=\"\\tx\\n\"}"},
		{"dash plain", "a: -x\n-b: c\n", "{a=-x,-b=c}"},
		{"indented root", "  a: b\n  c: d\n", "{a=b,c=d}"},
		// Plain scalars over several lines.
		{"plain on next lines", "a:\n  b\n  c\n", "{a=b c}"},
		{"plain continued", "a: b\n  c\n\n  d\ne: f\n", "{a=b c\nd,e=f}"},
		{"plain continued with comment", "a: b\n   c # x\nd: e\n", "{a=b c,d=e}"},
		{"plain continued in list", "- a\n  b\n- c\n", "[a b,c]"},
		{"plain continued in kubectl list", "a:\n- x\n  y\n- z\n", "{a=[x y,z]}"},
		{"plain continued with dash", "a: b\n  - c\n", "{a=b - c}"},
		{"plain continued path", "cmd-path: /usr/lib/google-cloud-sdk/bin/\n  gcloud\n", "{cmd-path=/usr/lib/google-cloud-sdk/bin/ gcloud}"},
		{"top plain continued", "hello\nworld\n", "hello world"},
		// Quoted scalars over several lines.
		{"double continued", "a: \"b\n  c\"\n", "{a=\"b c\"}"},
		{"double empty lines", "a: \"b  \n\n   c\"\n", "{a=\"b\\nc\"}"},
		{"double escaped break", "a: \"b\\\n   c\"\n", "{a=\"bc\"}"},
		{"double escaped space", "a: \"b\\ \n  c\"\n", "{a=\"b  c\"}"},
		{"double escaped break then empty", "a: \"b\\\n\n  c\"\n", "{a=\"b\\nc\"}"},
		{"single continued", "a: 'b\n\n  c'\nd: e\n", "{a=\"b\\nc\",d=e}"},
		{"quoted on next lines", "a:\n  \"b\n  c\"\nd: e\n", "{a=\"b c\",d=e}"},
		{"top quoted continued", "\"a\nb\"\n", "\"a b\""},
		// Block scalars with every header.
		{"folded", "a: >\n  x\n  y\n\n  z\n", "{a=\"x y\\nz\\n\"}"},
		{"folded more indented", "a: >\n  x\n    y\n  z\n", "{a=\"x\\n  y\\nz\\n\"}"},
		{"folded strip", "a: >-\n  x\n  y\n", "{a=\"x y\"}"},
		{"folded keep", "a: >+\n  x\n\nb: 1\n", "{a=\"x\\n\\n\",b=1}"},
		{"folded leading empty", "a: >\n\n  x\n", "{a=\"\\nx\\n\"}"},
		{"literal indicator", "a: |2\n    x\n  y\n", "{a=\"  x\\ny\\n\"}"},
		{"literal indicator strip", "a: |-2\n   x\n", "{a=\" x\"}"},
		{"literal strip indicator", "a: |2-\n   x\n", "{a=\" x\"}"},
		{"literal indicator in list", "- |1\n  x\n", "[\" x\\n\"]"},
		{"literal indicator nested", "a:\n  b: |2\n      x\n", "{a={b=\"  x\\n\"}}"},
		{"folded indicator keep", "a: >1+\n  x\n\n", "{a=\" x\\n\\n\"}"},
		// Flow collections over several lines, and JSON.
		{"flow continued", "a: [b,\n  c]\n", "{a=[b,c]}"},
		{"flow with a line of tabs", "a: [b,\n\t\n  c]\n", "{a=[b,c]}"},
		{"flow with comment", "a: [b, # c\n  d]\n", "{a=[b,d]}"},
		{"json pretty", "{\n  \"a\": [\n    1,\n    {\"b\": null}\n  ],\n  \"c\": \"d\"\n}\n", "{a=[1,{b=~}],c=\"d\"}"},
		{"json minified", "{\"a\":{\"b\":\"c\"},\"d\":[],\"e\":true}", "{a={b=\"c\"},d=[],e=true}"},
		{"folded keep empty", "a: >+\n\nb: 1\n", "{a=\"\\n\",b=1}"},
		{"literal at the end without a line break", "a: |\n  x", "{a=\"x\"}"},
		{"literal keep, last empty line without a line break", "a: |1+\n\n\n  x\n ", "{a=\"\\n\\n x\\n\"}"},
		{"json list", "[\n  \"x\",\n  2\n]\n", "[\"x\",2]"},
		// Chomping of several trailing line breaks: clip keeps one, keep
		// all, strip none.
		{"literal clip trailing empty lines", "a: |\n  x\n\n\n", "{a=\"x\\n\"}"},
		{"literal keep trailing empty lines", "a: |+\n  x\n\n\n", "{a=\"x\\n\\n\\n\"}"},
		{"literal strip trailing empty lines", "a: |-\n  x\n\n\n", "{a=\"x\"}"},
		{"folded clip trailing empty lines", "a: >\n  x\n\n\nb: 1\n", "{a=\"x\\n\",b=1}"},
		// An empty block scalar in a nested map: the next line at the
		// map's indentation is its sibling key, not the scalar's content.
		{"literal empty nested", "m:\n  a: |\n  b: c\n", "{m={a=\"\",b=c}}"},
		{"folded empty nested", "m:\n  a: >-\n\n  b: c\n", "{m={a=\"\",b=c}}"},
		{"literal empty in list item", "- a: |\n  b: c\n", "[{a=\"\",b=c}]"},
		// Folding: a line that starts with a tab or a space after the
		// indentation is more indented and keeps its line breaks.
		{"folded tab-led line", "a: >\n  x\n  \ty\n  z\n", "{a=\"x\\n\\ty\\nz\\n\"}"},
		{"folded tab-led last line", "a: >\n  x\n  y\n  \tz\n", "{a=\"x y\\n\\tz\\n\"}"},
		{"folded tab-led lines", "a: >\n  x\n  \ty\n  \tz\n  w\n", "{a=\"x\\n\\ty\\n\\tz\\nw\\n\"}"},
		{"folded more indented between empty lines", "a: >\n  x\n\n    y\n\n  z\n", "{a=\"x\\n\\n  y\\n\\nz\\n\"}"},
		// A quoted value with spaces, nested as kubectl writes a password:
		// its spaces are not a line's indentation.
		{"quoted with spaces nested", "users:\n- name: admin\n  user:\n    password: 'c0rrect: horse \"battery\"'\n    username: admin\n",
			"{users=[{name=admin,user={password=\"c0rrect: horse \\\"battery\\\"\",username=admin}}]}"},
		{"double-quoted with spaces nested", "a:\n  b: \"x y\"\n", "{a={b=\"x y\"}}"},
		{"nul escape", "a: \"x\\0\"\n", "{a=\"x\\x00\"}"},
		// A blank line of spaces, as an editor leaves it, before a
		// literal's first line: as deep as that line is allowed, and
		// before a sibling key it is the whole, empty, scalar.
		{"literal leading line of spaces", "a: |\n  \n  x\n", "{a=\"\\nx\\n\"}"},
		{"literal empty nested, a line of spaces", "m:\n  a: |\n     \n  b: c\n", "{m={a=\"\",b=c}}"},
		// A comment in a flow collection ends its line: the next line
		// starts at its first character.
		{"flow comment before a line at column 0", "{kind: Config, # c\napiVersion: v1}\n", "{kind=Config,apiVersion=v1}"},
		// A comment starts at a '#' after a space or a tab, whatever
		// follows it.
		{"comments without a space after the hash", "server: https://h:6443 #prod\nname: x\t#c\n", "{server=https://h:6443,name=x}"},
		{"flow comment without a space after the hash", "a: [b, #c\n  d]\n", "{a=[b,d]}"},
		{"literal indicator 9", "a: |9\n          x\n", "{a=\" x\\n\"}"},
		// U+0085 and U+00A0 are printable; U+0080 to U+009F else are not.
		{"next line and no-break space", "a: x\u0085y\u00a0z\n", "{a=x\u0085y\u00a0z}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse([]byte(tt.doc))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("Parse = %s, want an error", render(n))
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := render(n); got != tt.want {
				t.Errorf("Parse = %s\nwant    %s", got, tt.want)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	tests := []struct {
		name, doc string
		line      int
		msg       string
	}{
		{"anchor", "a: &x b\n", 1, "anchors"},
		{"alias", "a: b\nc: *x\n", 2, "aliases"},
		{"tag", "a: !!str b\n", 1, "tags"},
		{"directive", "%YAML 1.2\n---\na: b\n", 1, "directives"},
		{"two docs", "a: b\n---\nc: d\n", 2, "multiple documents"},
		{"content after end", "a: b\n...\nc: d\n", 3, "after the end"},
		{"block scalar in flow", "a: [>]\n", 1, "block scalars"},
		{"indent indicator 0", "a: |0\n  x\n", 1, "indicator 0"},
		{"bad block header", "a: |x\n", 1, "block scalar header"},
		{"two chomping indicators", "a: |-+\n", 1, "block scalar header"},
		{"tab indent", "a:\n\tb: c\n", 2, "tab"},
		{"tab indent in list", "a:\n-\tb: c\n", 2, "tab"},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", 3, "duplicate map key (first at line 1)"},
		{"duplicate quoted key", "a: 1\n\"a\": 3\n", 2, "duplicate"},
		{"duplicate flow key", "a: {x: 1, x: 2}\n", 1, "duplicate"},
		{"bad indent", "a:\n    b: 1\n  c: 2\n", 3, "unexpected indentation"},
		{"over indent after scalar", "a: b\n  c: d\n", 2, "continuation line of a plain scalar"},
		{"key under a plain scalar", "a:\n  b\n  c: d\n", 3, "continuation line of a plain scalar"},
		{"plain after a comment", "a: b # c\n  d\n", 2, "unexpected indentation"},
		{"content after quoted", "a:\n  \"b\"\n  c\n", 3, "after a scalar value"},
		{"mapping in plain", "a: b: c\n", 1, "': '"},
		{"no colon", "a: b\nc\n", 2, "expected a map key"},
		{"list in map", "a: b\n- c\n", 2, "list item"},
		{"item after scalar", "a: - b\n", 1, "list item"},
		{"unterminated double", "a: \"b\n  c\n", 1, "unterminated double-quoted"},
		{"quoted indented too little", "a:\n  b: \"x\n  y\"\n", 3, "indented too little"},
		{"document marker in quoted", "\"a\n---\nb\"\n", 2, "document marker"},
		{"unterminated single", "x: 1\na: 'b\n", 2, "unterminated single-quoted"},
		{"bad escape", "a: \"\\q\"\n", 1, "invalid escape"},
		{"bad unicode escape", "a: \"\\uD800\"\n", 1, "invalid \\u escape"},
		{"short escape", "a: \"\\x4\"\n", 1, "\\x escape"},
		{"text after quote", "a: \"b\" c\n", 1, "after a quoted"},
		{"hash after quote", "a: \"b\"#c\n", 1, "after a quoted"},
		{"unclosed flow", "a: [b, c\n", 1, "not closed"},
		{"unclosed pretty flow", "{\n  \"a\": 1\n", 1, "not closed"},
		{"flow indented too little", "a:\n  b: [x,\n  y]\n", 3, "indented too little"},
		{"document marker in flow", "[a,\n---\n]\n", 2, "document marker"},
		{"plain over lines in flow", "a: [b\n  c]\n", 1, "plain scalars over several lines"},
		{"flow key over lines", "a: {\"b\n  c\": d}\n", 1, "one line"},
		{"flow colon on next line", "a: {b\n  : c}\n", 1, "expected ':'"},
		{"flow junk", "a: [b] c\n", 1, "after a flow"},
		{"flow pair in list", "a: [b: c]\n", 1, "pairs in a flow list"},
		{"flow empty entry", "a: [b,,c]\n", 1, "expected a value"},
		{"flow missing colon", "a: {b c}\n", 1, "expected ':'"},
		{"flow map key", "a: {[b]: c}\n", 1, "scalars"},
		{"complex key", "? a\n: b\n", 1, "complex keys"},
		{"merge key", "a:\n  <<: {b: c}\n", 2, "merge keys"},
		{"flow merge key", "a: {<<: {b: c}}\n", 1, "merge keys"},
		{"reserved", "a: @b\n", 1, "reserved"},
		{"control char", "a: b\nc: \x01\n", 2, "control character"},
		{"invalid utf8", "a: \xff\n", 1, "UTF-8"},
		{"literal leading spaces", "a: |\n     \n  x\n", 2, "leading empty line"},
		{"content on doc start", "--- a\n", 1, "'---'"},
		{"empty key", ": b\n", 1, "empty map key"},
		{"stray bracket", "a: ]\n", 1, "unexpected"},
		{"duplicate key in pretty json", "{\n  \"a\": 1,\n  \"a\": 2\n}\n", 3, "duplicate map key"},
		{"bad escape in pretty json", "{\n  \"a\": [\n    \"\\q\"\n  ]\n}\n", 3, "invalid escape"},
		{"bracket key", "a: 1\n]: z\n", 2, "expected a map key"},
		// A file cut off inside a quoted scalar, with no line break at
		// the end.
		{"unterminated double at the end", "a: \"b", 1, "unterminated double-quoted"},
		{"unterminated single at the end", "a:\n  'b", 2, "unterminated single-quoted"},
		{"unterminated after an escape at the end", "a: \"\\u00e9", 1, "unterminated double-quoted"},
		{"short escape at the end", "a: \"\\x4", 1, "invalid \\x escape"},
		// Line numbers go on after a comment in a flow collection.
		{"duplicate key after a comment in pretty json", "{\n  \"a\": 1, # one\n  \"a\": 2\n}\n", 3, "duplicate map key"},
		{"flow indented too little after a comment", "a:\n  b: [x, # c\n  y]\n", 3, "indented too little"},
		{"unterminated after a backslash at the end", "a: \"b\\", 1, "unterminated double-quoted"},
		{"control character U+0080", "a: x\u0080\n", 1, "control character U+0080"},
		{"hash at a flow value", "a: [#b]\n", 1, "expected a value"},
		{"flow collection after a plain scalar", "a: [b[c]]\n", 1, "expected ',' or ']' in a flow list"},
		{"root less indented than its first line", "  a: b\nc: d\n", 2, "unexpected indentation"},
		{"content after the end marker", "a: b\n... x\n", 2, "content after '...'"},
		{"complex key in a value", "a: ? b\n", 1, "complex keys"},
		{"colon at a value", "a: : b\n", 1, "unexpected ':'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse = %s, want an error", render(n))
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v is not a *SyntaxError", err, err)
			}
			if se.Line != tt.line || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("error %q, want line %d and %q", err, tt.line, tt.msg)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	deepBlock := strings.Repeat("- ", MaxDepth+5) + "x\n"
	deepFlow := "a: " + strings.Repeat("[", MaxDepth+5) + strings.Repeat("]", MaxDepth+5) + "\n"
	var deepMap strings.Builder
	for i := range MaxDepth + 5 {
		deepMap.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	for _, doc := range []string{deepBlock, deepFlow, deepMap.String()} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "nesting deeper") {
			t.Errorf("Parse(%.20q...) error = %v, want a nesting error", doc, err)
		}
	}
	// The root is at depth 1, and each value at one more than the map or
	// list that holds it: n nested block lists and their scalar, n
	// nested flow lists, or n nested flow maps.
	docs := map[string]func(n int) string{
		"block lists": func(n int) string { return strings.Repeat("- ", n-1) + "x\n" },
		"flow lists":  func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) + "\n" },
		"flow maps":   func(n int) string { return strings.Repeat("{a: ", n-1) + "{}" + strings.Repeat("}", n-1) + "\n" },
	}
	for name, doc := range docs {
		if _, err := Parse([]byte(doc(MaxDepth))); err != nil {
			t.Errorf("%s at depth %d: %v", name, MaxDepth, err)
		}
		if _, err := Parse([]byte(doc(MaxDepth + 1))); err == nil || !strings.Contains(err.Error(), "nesting deeper") {
			t.Errorf("%s at depth %d: error %v, want a nesting error", name, MaxDepth+1, err)
		}
	}
}

// TestValuesLimit checks that a document may hold MaxValues map entries
// and list items, and not one more.
func TestValuesLimit(t *testing.T) {
	list := func(n int) []byte { return []byte("[" + strings.Repeat("0,", n) + "]\n") }
	if _, err := Parse(list(MaxValues)); err != nil {
		t.Errorf("%d items: %v", MaxValues, err)
	}
	if _, err := Parse(list(MaxValues + 1)); err == nil || !strings.Contains(err.Error(), "more than 262144") {
		t.Errorf("%d items: error %v, want the MaxValues limit", MaxValues+1, err)
	}
}

func TestErrorsDoNotQuoteText(t *testing.T) {
	const secret = "sekrit-7f3a9c"
	docs := []string{
		"token " + secret + "\nx: y\n",
		"a: b\n" + secret + "\n",
		"a: \"" + secret + "\\q\"\n",
		"a: [" + secret + "\n",
		"a: " + secret + ": x\n",
		secret + ": 1\n" + secret + ": 2\n",
		"a: {" + secret + " x}\n",
	}
	for _, doc := range docs {
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", doc)
			continue
		}
		if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("error %q quotes the document", err)
		}
	}
}

// get returns the value of key in map n, or nil when n is not a map or
// has no such key.
func (n *Node) get(key string) *Node {
	if n == nil || n.Kind != Map {
		return nil
	}
	for _, e := range n.Entries {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

func TestGetAndLines(t *testing.T) {
	n, err := Parse([]byte("# c\na: 1\nb:\n  - x\n  - y: z\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n.Line != 2 || n.get("a").Value != "1" || n.get("missing") != nil || n.get("a").get("x") != nil {
		t.Errorf("unexpected tree %s", render(n))
	}
	b := n.get("b")
	if b.Kind != List || b.Line != 4 || b.Items[1].Line != 5 || n.Entries[1].Line != 3 {
		t.Errorf("lines: b=%d item=%d entry=%d", b.Line, b.Items[1].Line, n.Entries[1].Line)
	}
	// An empty document is a null on line 1, whatever markers and
	// comments it holds.
	for _, doc := range []string{"", "# c\n\n", "---\n...\n", "# c\n---\n# d\n"} {
		if n, err := Parse([]byte(doc)); err != nil || !n.IsNull() || n.Line != 1 {
			t.Errorf("Parse(%q) = %+v, %v; want a null on line 1", doc, n, err)
		}
	}
	for k, want := range map[Kind]string{0: "Kind(0)", Scalar: "scalar", Map: "map", List: "list", 4: "Kind(4)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

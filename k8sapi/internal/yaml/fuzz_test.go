package yaml

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// flowText writes n as one line of flow YAML with every scalar
// double-quoted and nulls as ~.
func flowText(n *Node) string {
	var b strings.Builder
	var walk func(n *Node)
	walk = func(n *Node) {
		switch {
		case n.Kind == Map:
			b.WriteByte('{')
			for i, e := range n.Entries {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.Quote(e.Key) + ": ")
				walk(e.Value)
			}
			b.WriteByte('}')
		case n.Kind == List:
			b.WriteByte('[')
			for i, it := range n.Items {
				if i > 0 {
					b.WriteString(", ")
				}
				walk(it)
			}
			b.WriteByte(']')
		case n.IsNull():
			b.WriteByte('~')
		default:
			b.WriteString(strconv.Quote(n.Value))
		}
	}
	walk(n)
	return b.String()
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives a round trip through flow style.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	// The kubeconfig corpus: the shapes that tools write.
	corpus, _ := filepath.Glob("../../testdata/kubeconfig/corpus/*.yaml")
	seeds = append(seeds, corpus...)
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: [x, {y: \"z\\u00e9\"}]\nb: |-\n  t\n"))
	f.Add([]byte("- - a\n  - b\n-\n  c: 'd''e'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Parse(data)
		if err != nil {
			if _, ok := err.(*SyntaxError); !ok {
				t.Fatalf("error %T is not a *SyntaxError", err)
			}
			return
		}
		text := flowText(n)
		if n.Kind == Scalar {
			return // a top-level scalar's flow text is not a flow collection
		}
		m, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", text, err)
		}
		if again := flowText(m); again != text {
			t.Fatalf("round trip changed the tree:\n%s\n%s", text, again)
		}
	})
}

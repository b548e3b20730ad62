package websocket

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// FuzzReadFrames feeds the client arbitrary server bytes: it must never
// panic, hold a message over its cap, return text that is not UTF-8, or
// loop without reading.
func FuzzReadFrames(f *testing.F) {
	for _, seed := range [][]byte{
		rfcText, rfcMaskedText, append(append([]byte{}, rfcFragment1...), rfcFragment2...),
		append(append([]byte{}, rfcPing...), rfcText...), rfcBinary256,
		{0x88, 0x02, 0x03, 0xe8}, {0x82, 0x7F, 0, 0, 0, 0x10, 0, 0, 0, 0}, {0x81, 0x02, 0xc3, 0x28},
	} {
		f.Add(seed)
	}
	const limit = 300
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewConn(nopCloser{bytes.NewReader(data)}, limit)
		c.rand = fixedKey{}
		for range len(data) + 1 {
			op, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			if len(p) > limit {
				t.Fatalf("message of %d bytes over the cap of %d", len(p), limit)
			}
			if op == OpText && !utf8.Valid(p) {
				t.Fatalf("text message not UTF-8: %q", p)
			}
			if op != OpText && op != OpBinary {
				t.Fatalf("message of opcode %d", op)
			}
		}
		t.Fatalf("more messages than bytes in %d bytes", len(data))
	})
}

package metrics

import (
	"math"
	"strconv"
	"strings"
)

// appendFloat appends v as the exposition format writes numbers: "+Inf",
// "-Inf", "NaN", an integer without exponent when v is one and exactly
// representable, and otherwise the shortest 'g' form that reads back as v.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case v == math.Trunc(v) && math.Abs(v) <= 1<<53:
		return strconv.AppendInt(b, int64(v), 10) // -0 too becomes "0"
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// labelEscaper escapes a label value: backslash, double quote and
// newline. helpEscaper escapes a HELP text: backslash and newline.
var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// validName reports whether s is a valid metric name,
// [a-zA-Z_:][a-zA-Z0-9_:]*, or, when label is set, a valid label name:
// [a-zA-Z_][a-zA-Z0-9_]* not starting with the reserved "__".
func validName(s string, label bool) bool {
	if s == "" || label && strings.HasPrefix(s, "__") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' && !label || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

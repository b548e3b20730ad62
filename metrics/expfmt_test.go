package metrics

import (
	"bufio"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// parsedSample is one sample line of the exposition.
type parsedSample struct {
	name   string
	labels [][2]string // in order
	value  float64
}

// parsedFamily is one family: its HELP, TYPE and samples.
type parsedFamily struct {
	name, help, typ string
	samples         []parsedSample
}

// parseExposition is a strict reader of the text format 0.0.4, for tests:
// every line must be a HELP, a TYPE or a sample; every family must start
// with HELP then TYPE; samples must belong to the family above them.
func parseExposition(t *testing.T, text string) []parsedFamily {
	t.Helper()
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Fatalf("output does not end with a newline")
	}
	var fams []parsedFamily
	sc := bufio.NewScanner(strings.NewReader(text))
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("line %d %q: %s", ln, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, ok := strings.Cut(line[len("# HELP "):], " ")
			if !ok || !validName(name, false) {
				fail("bad HELP")
			}
			h, err := unescape(help, false)
			if err != nil {
				fail("%v", err)
			}
			for _, f := range fams {
				if f.name == name {
					fail("family %s appears twice", name)
				}
			}
			fams = append(fams, parsedFamily{name: name, help: h})
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, ok := strings.Cut(line[len("# TYPE "):], " ")
			if !ok || len(fams) == 0 || fams[len(fams)-1].name != name || fams[len(fams)-1].typ != "" {
				fail("TYPE does not follow its HELP")
			}
			switch typ {
			case "counter", "gauge", "histogram":
			default:
				fail("unknown type %q", typ)
			}
			fams[len(fams)-1].typ = typ
		case strings.HasPrefix(line, "#"), line == "":
			fail("unexpected comment or blank line")
		default:
			if len(fams) == 0 || fams[len(fams)-1].typ == "" {
				fail("sample before HELP and TYPE")
			}
			s := parseSample(t, fail, line)
			f := &fams[len(fams)-1]
			want := []string{f.name}
			if f.typ == "histogram" {
				want = []string{f.name + "_bucket", f.name + "_sum", f.name + "_count"}
			}
			ok := false
			for _, w := range want {
				ok = ok || s.name == w
			}
			if !ok {
				fail("sample %s does not belong to %s family %s", s.name, f.typ, f.name)
			}
			f.samples = append(f.samples, s)
		}
	}
	for _, f := range fams {
		checkFamily(t, f)
	}
	return fams
}

func parseSample(t *testing.T, fail func(string, ...any), line string) parsedSample {
	t.Helper()
	var s parsedSample
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		fail("no value")
	}
	s.name = line[:i]
	if !validName(s.name, false) {
		fail("bad metric name")
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				fail("label without =")
			}
			name := rest[:eq]
			if !validName(name, true) && name != "le" {
				fail("bad label name %q", name)
			}
			rest = rest[eq+1:]
			if rest == "" || rest[0] != '"' {
				fail("label value not quoted")
			}
			// find the closing quote, skipping escapes
			j := 1
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' {
					j++
				}
			}
			if j >= len(rest) {
				fail("unterminated label value")
			}
			v, err := unescape(rest[1:j], true)
			if err != nil {
				fail("%v", err)
			}
			s.labels = append(s.labels, [2]string{name, v})
			rest = rest[j+1:]
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
				continue
			}
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			fail("expected , or } after label")
		}
	}
	if !strings.HasPrefix(rest, " ") || strings.Contains(rest[1:], " ") {
		fail("expected one space then the value (no timestamp)")
	}
	v, err := parseValue(rest[1:])
	if err != nil {
		fail("%v", err)
	}
	s.value = v
	return s
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if strings.ContainsAny(s, "iInN") {
		return 0, fmt.Errorf("value %q: use +Inf, -Inf or NaN", s)
	}
	return strconv.ParseFloat(s, 64)
}

// unescape undoes the format's escapes; quotes may be escaped only in
// label values.
func unescape(s string, label bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' {
			return "", fmt.Errorf("raw newline")
		}
		if label && c == '"' {
			return "", fmt.Errorf("raw double quote in label value")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("dangling backslash")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !label {
				return "", fmt.Errorf(`\" in HELP`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

// checkFamily checks what the TYPE promises: counters are not negative,
// and every histogram series has cumulative buckets ending in +Inf equal
// to its _count, then _sum and _count, with the same labels throughout.
func checkFamily(t *testing.T, f parsedFamily) {
	t.Helper()
	switch f.typ {
	case "counter":
		for _, s := range f.samples {
			if s.value < 0 {
				t.Errorf("%s: negative counter %v", f.name, s.value)
			}
		}
	case "histogram":
		i := 0
		for i < len(f.samples) {
			var prev float64 = -1
			prevLE := math.Inf(-1)
			base := ""
			var inf float64 = -1
			for ; i < len(f.samples) && f.samples[i].name == f.name+"_bucket"; i++ {
				s := f.samples[i]
				n := len(s.labels)
				if n == 0 || s.labels[n-1][0] != "le" {
					t.Fatalf("%s: bucket without le last: %v", f.name, s.labels)
				}
				if b := fmt.Sprint(s.labels[:n-1]); base == "" {
					base = b
				} else if b != base {
					t.Fatalf("%s: bucket labels changed within a series: %s vs %s", f.name, b, base)
				}
				le, err := parseValue(s.labels[n-1][1])
				if err != nil || le <= prevLE {
					t.Fatalf("%s: le %q not increasing", f.name, s.labels[n-1][1])
				}
				if s.value < prev {
					t.Fatalf("%s: buckets not cumulative at le=%v", f.name, le)
				}
				prev, prevLE = s.value, le
				if math.IsInf(le, 1) {
					inf = s.value
				}
			}
			if inf < 0 {
				t.Fatalf("%s: series without a +Inf bucket last", f.name)
			}
			if i+1 >= len(f.samples) || f.samples[i].name != f.name+"_sum" || f.samples[i+1].name != f.name+"_count" {
				t.Fatalf("%s: buckets not followed by _sum and _count", f.name)
			}
			for _, s := range f.samples[i : i+2] {
				if fmt.Sprint(s.labels) != base {
					t.Fatalf("%s: %s labels %v differ from the buckets' %s", f.name, s.name, s.labels, base)
				}
			}
			if c := f.samples[i+1].value; c != inf {
				t.Fatalf("%s: _count %v != +Inf bucket %v", f.name, c, inf)
			}
			i += 2
		}
	}
}

package k8sapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// IntOrString is a value the API accepts as either an integer or a
// string, such as a Service port's targetPort (a number or a port name) or
// a rolling update's maxSurge ("25%" or 2). The zero value is the integer
// 0. IntOrString values are comparable with ==.
type IntOrString struct {
	str   string
	num   int32
	isStr bool
}

// FromInt returns the integer i as an IntOrString.
func FromInt(i int32) IntOrString { return IntOrString{num: i} }

// FromString returns the string s as an IntOrString.
func FromString(s string) IntOrString { return IntOrString{str: s, isStr: true} }

// IsString reports whether v holds a string.
func (v IntOrString) IsString() bool { return v.isStr }

// Int returns v's integer, or 0 if v holds a string.
func (v IntOrString) Int() int32 { return v.num }

// String returns v's string, or the decimal form of its integer.
func (v IntOrString) String() string {
	if v.isStr {
		return v.str
	}
	return strconv.FormatInt(int64(v.num), 10)
}

// MarshalJSON writes a JSON number or a JSON string.
func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.isStr {
		return json.Marshal(v.str)
	}
	return strconv.AppendInt(nil, int64(v.num), 10), nil
}

var errIntOrString = errors.New("k8sapi: an int-or-string must be a JSON string or a 32-bit integer")

// UnmarshalJSON reads a JSON string or an integer that fits in 32 bits.
// null leaves v unchanged, as encoding/json does for other types.
func (v *IntOrString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var s string
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"' && json.Unmarshal(b, &s) == nil:
		*v = FromString(s)
		return nil
	}
	// Anything else, a string that is not valid JSON included, must be
	// an integer.
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return errIntOrString
	}
	*v = FromInt(int32(n))
	return nil
}

package k8sapi

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// StringMap is a map of strings, as labels, annotations and selectors are.
// It is an ordinary map; only its JSON decoding differs from encoding/json's
// (same result, about half the allocations), because every object the
// operator decodes carries several of them.
type StringMap map[string]string

var errStringMap = errors.New("k8sapi: a string map must be a JSON object of strings")

// UnmarshalJSON decodes a JSON object of strings, or null (a nil map). As
// with encoding/json, a null value decodes as "" and a later duplicate key
// wins. Any other value is an error.
func (m *StringMap) UnmarshalJSON(data []byte) error {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == 'n' {
		*m = nil
		return nil
	}
	if i >= len(data) || data[i] != '{' {
		return errStringMap
	}
	out := *m
	if out == nil {
		out = StringMap{}
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		*m = out
		return nil
	}
	for {
		key, next, err := readString(data, i)
		if err != nil {
			return err
		}
		i = skipSpace(data, next)
		if i >= len(data) || data[i] != ':' {
			return errStringMap
		}
		i = skipSpace(data, i+1)
		var val string
		switch {
		case i < len(data) && data[i] == '"':
			if val, i, err = readString(data, i); err != nil {
				return err
			}
		case i+4 <= len(data) && string(data[i:i+4]) == "null":
			i += 4
		default:
			return errStringMap
		}
		out[key] = val
		i = skipSpace(data, i)
		if i >= len(data) {
			return errStringMap
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			*m = out
			return nil
		default:
			return errStringMap
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// readString reads the JSON string that starts at data[i], returning it and
// the index after its closing quote. Plain strings are copied as they are;
// one with escapes or bytes that are not UTF-8 goes through encoding/json.
func readString(data []byte, i int) (string, int, error) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, errStringMap
	}
	plain := true
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '\\':
			plain = false
			j++ // skip the escaped byte
		case c == '"':
			seg := data[i+1 : j]
			if plain && utf8.Valid(seg) {
				return string(seg), j + 1, nil
			}
			var s string
			if err := json.Unmarshal(data[i:j+1], &s); err != nil {
				return "", 0, err
			}
			return s, j + 1, nil
		case c < 0x20:
			return "", 0, errStringMap
		}
	}
	return "", 0, errStringMap
}

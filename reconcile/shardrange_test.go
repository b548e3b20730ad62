package reconcile

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
)

const uidField = "object.metadata.uid"

func TestShardSelector(t *testing.T) {
	r := func(start, end string) string {
		return "shardRange(object.metadata.uid, '0x" + start + "', '0x" + end + "')"
	}
	const top = "10000000000000000"
	tests := []struct {
		shards int
		held   []int
		want   string
	}{
		{1, []int{0}, r("0000000000000000", top)},
		{2, []int{0}, r("0000000000000000", "8000000000000000")},
		{2, []int{1}, r("8000000000000000", top)},
		// 256/6 = 42.67: buckets 0-41, 42-84, 85-127, 128-169, 170-212, 213-255.
		{6, []int{0}, r("0000000000000000", "2a00000000000000")},
		{6, []int{1}, r("2a00000000000000", "5500000000000000")},
		{6, []int{4}, r("aa00000000000000", "d500000000000000")},
		{6, []int{5}, r("d500000000000000", top)},
		// Adjacent shards make one range, in any order, duplicates or not;
		// the last and the first are not adjacent.
		{6, []int{1, 0}, r("0000000000000000", "5500000000000000")},
		{6, []int{5, 0, 2, 3, 2}, r("0000000000000000", "2a00000000000000") + " || " +
			r("5500000000000000", "aa00000000000000") + " || " + r("d500000000000000", top)},
		{6, []int{0, 1, 2, 3, 4, 5}, r("0000000000000000", top)},
		{256, []int{0}, r("0000000000000000", "0100000000000000")},
		{256, []int{7}, r("0700000000000000", "0800000000000000")},
		{256, []int{255}, r("ff00000000000000", top)},
		{256, []int{254, 255}, r("fe00000000000000", top)},
	}
	for _, tt := range tests {
		got, err := ShardSelector(uidField, tt.shards, tt.held...)
		if err != nil || got != tt.want {
			t.Errorf("ShardSelector(%d, %v) = %q, %v; want %q", tt.shards, tt.held, got, err, tt.want)
		}
	}
	got, err := ShardSelector("object.metadata.namespace", 2, 1)
	if want := "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"; err != nil || got != want {
		t.Errorf("by namespace: %q, %v; want %q", got, err, want)
	}
}

func TestShardSelectorRefuses(t *testing.T) {
	tests := []struct {
		field  string
		shards int
		held   []int
		want   string
	}{
		{"object.metadata.name", 2, []int{0}, `shards [0] of 2 over "object.metadata.name"`},
		{"", 2, []int{0}, `shards [0] of 2 over ""`},
		{uidField, 0, []int{0}, "shards [0] of 0 over"},
		{uidField, -1, []int{0}, "shards [0] of -1 over"},
		{uidField, 257, []int{0}, "shards [0] of 257 over"},
		{uidField, 6, []int{6}, "shards [6] of 6 over"},
		{uidField, 6, []int{2, -1}, "shards [2 -1] of 6 over"},
		{uidField, 6, nil, "shards [] of 6 over"},
	}
	const rules = ": want 1 to 256 shards, at least one held, each from 0 to shards-1, over object.metadata.uid or object.metadata.namespace"
	for _, tt := range tests {
		got, err := ShardSelector(tt.field, tt.shards, tt.held...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasSuffix(err.Error(), rules) || got != "" {
			t.Errorf("ShardSelector(%q, %d, %v) = %q, %v; want an error with %q", tt.field, tt.shards, tt.held, got, err, tt.want)
		}
	}
	// The limits themselves are allowed.
	for _, held := range [][]int{{0}, {255}} {
		if _, err := ShardSelector(uidField, 256, held...); err != nil {
			t.Errorf("shards %v of 256: %v", held, err)
		}
	}
}

// fnv64a is the hash of the API server's shard selectors.
func fnv64a(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func TestBucket(t *testing.T) {
	// The FNV-1a vectors: "" is the offset basis, 0xcbf29ce484222325.
	for v, want := range map[string]int{"": 0xcb, "a": 0xaf, "foobar": 0x85} {
		if got := Bucket(v); got != want {
			t.Errorf("Bucket(%q) = %#x, want %#x", v, got, want)
		}
	}
	for i := range 1000 {
		v := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919)
		if got, want := Bucket(v), int(fnv64a(v)>>56); got != want {
			t.Fatalf("Bucket(%q) = %d, want %d", v, got, want)
		}
	}
}

// Each value is in the range text of exactly one shard: the one that owns
// its bucket, floor(k×256/S) <= bucket < floor((k+1)×256/S).
func TestShardSelectorPartitions(t *testing.T) {
	for _, shards := range []int{1, 2, 3, 5, 6, 7, 64, 100, 255, 256} {
		texts := make([]string, shards)
		for k := range shards {
			var err error
			if texts[k], err = ShardSelector(uidField, shards, k); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2000 {
			v := fmt.Sprintf("%08x-1111-4000-8000-%012x", i*104729, i)
			var in []int
			for k, text := range texts {
				if inRanges(t, text, fnv64a(v)) {
					in = append(in, k)
				}
			}
			b := Bucket(v)
			if len(in) != 1 || in[0]*256/shards > b || b >= (in[0]+1)*256/shards {
				t.Fatalf("%d shards: %q (bucket %d) is in the ranges of shards %v", shards, v, b, in)
			}
		}
	}
}

// inRanges reports whether h is in one of the ranges of the shard
// selector text.
func inRanges(t *testing.T, text string, h uint64) bool {
	t.Helper()
	for r := range strings.SplitSeq(text, " || ") {
		args, ok := strings.CutPrefix(r, "shardRange("+uidField+", '")
		args, ok2 := strings.CutSuffix(args, "')")
		start, end, ok3 := strings.Cut(args, "', '")
		if !ok || !ok2 || !ok3 || len(start) != 18 || len(end) != 18 && end != "0x10000000000000000" {
			t.Fatalf("malformed range %q", r)
		}
		lo, err := strconv.ParseUint(start, 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		hi, err := strconv.ParseUint(end, 0, 64)
		if end == "0x10000000000000000" {
			hi, err = 0, nil // 2⁶⁴: every h is below
		}
		if err != nil || hi != 0 && lo >= hi {
			t.Fatalf("range %q: %v", r, err)
		}
		if lo <= h && (hi == 0 || h < hi) {
			return true
		}
	}
	return false
}

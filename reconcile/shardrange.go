package reconcile

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// Bucket returns the bucket of value, from 0 to 255: the top byte of its
// 64-bit FNV-1a hash, the hash that a shard selector's ranges are over
// (see [ShardSelector]). It depends on value alone, not on the number
// of shards, so that a label that holds it stays true when that changes.
func Bucket(value string) int {
	h := fnv.New64a()
	h.Write([]byte(value))
	return int(h.Sum64() >> 56)
}

// ShardSelector returns the shard selector (see k8sapi.ListOptions) of
// the objects of the shards held, of shards, by the hash of field:
// "object.metadata.uid" or "object.metadata.namespace". Shard k owns the
// buckets from k×256/shards to (k+1)×256/shards, each rounded down, the
// end excluded; the shards held next to each other make one range. Since
// each range is made of whole buckets, a shard's objects are those whose
// bucket the shard owns: a label that holds the bucket of an object's
// owner, on each of its children, selects with a label selector the
// children of the owners that a uid range selects.
//
// shards must be from 1 to 256, and held must name at least one shard,
// each from 0 to shards-1.
func ShardSelector(field string, shards int, held ...int) (string, error) {
	// At least one shard held, each from 0 to shards-1, means shards >= 1.
	outside := slices.ContainsFunc(held, func(k int) bool { return k < 0 || k >= shards })
	if field != "object.metadata.uid" && field != "object.metadata.namespace" || shards > 256 || len(held) == 0 || outside {
		return "", fmt.Errorf("reconcile: a shard selector of shards %v of %d over %q: want 1 to 256 shards, "+
			"at least one held, each from 0 to shards-1, over object.metadata.uid or object.metadata.namespace", held, shards, field)
	}
	in := make([]bool, shards+1) // in[k]: shard k is held; in[shards] never
	for _, k := range held {
		in[k] = true
	}
	var ranges []string
	for k := range shards {
		if !in[k] || k > 0 && in[k-1] {
			continue // not the first of a run of shards held
		}
		end := k + 1
		for in[end] {
			end++
		}
		// Buckets [b, e) are the hashes [b<<56, e<<56): in hex, two digits
		// and 14 zeros; e = 256 makes 0x100 and 14 zeros, 2⁶⁴, the end of
		// the hash space as the server writes it.
		ranges = append(ranges, fmt.Sprintf("shardRange(%s, '0x%02x00000000000000', '0x%02x00000000000000')",
			field, k*256/shards, end*256/shards))
	}
	return strings.Join(ranges, " || "), nil
}

package leader

import (
	"hash/fnv"
	"slices"
)

// ShardOf returns the shard of key among shards: the FNV-1a hash of the
// key, modulo shards. It depends on nothing but its arguments, so every
// replica and every version agrees on it.
func ShardOf(key string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(shards))
}

// balance decides which shards self takes and which it gives up, aiming
// for a fair share: with m live replicas, each holds S/m shards, rounded
// down or up. It never takes a shard someone else holds. It gives up
// shards over the share rounded up, and one more when another replica
// has less than the share rounded down and none is free; of the replicas
// that could give, only the one with the most shards (the smallest
// identity on a tie) does, so that they do not all give at once. When
// every replica is within its share and none is free, nothing moves: a
// stable membership keeps its shards where they are.
//
// members are the live replicas, self included; holders[k] holds shard
// k, "" when it is free or expired.
func balance(self string, members, holders []string) (take, give []int) {
	s := len(holders)
	m := max(len(members), 1)
	lo, hi := s/m, (s+m-1)/m
	count := map[string]int{}
	var mine, free []int // mine highest first, so that extras go from the top
	for k, h := range holders {
		switch h {
		case "":
			free = append(free, k)
		case self:
			mine = slices.Insert(mine, 0, k)
		}
		count[h]++
	}
	if len(mine) > hi {
		return nil, mine[:len(mine)-hi]
	}
	if len(mine) < hi && len(free) > 0 {
		// Start at a place of our own in the free list, so that replicas
		// taking at the same moment mostly try different shards.
		first := ShardOf(self, len(free))
		free = append(free[first:], free[:first]...)
		return free[:min(hi-len(mine), len(free))], nil
	}
	if len(mine) <= lo || len(free) > 0 {
		return nil, nil
	}
	needy := slices.ContainsFunc(members, func(r string) bool { return count[r] < lo })
	richest := self
	for _, r := range members {
		if count[r] > count[richest] || count[r] == count[richest] && r < richest {
			richest = r
		}
	}
	if needy && richest == self {
		return nil, mine[:1]
	}
	return nil, nil
}

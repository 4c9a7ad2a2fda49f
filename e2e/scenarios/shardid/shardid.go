// Package shardid computes kshard's shard of an entity id, as every sidecar does (DESIGN.md
// "Shard ids"): abs(h % N) + 1 with h the Java String.hashCode of the id over its UTF-16 code
// units. The scenarios use it to pick entity ids that cover every shard and to tell which
// requests went to the shards of a pod.
package shardid

import "unicode/utf16"

// JavaHashCode is Java's String.hashCode of s taken as UTF-16 (31*h + c, 32-bit wrap-around).
func JavaHashCode(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}

// Of is the shard (1..shards) of entity id among shards shards. Go's % keeps the dividend's sign,
// like Java's, so |h % shards| < shards never overflows.
func Of(id string, shards int) int {
	r := int(JavaHashCode(id)) % shards
	if r < 0 {
		r = -r
	}
	return r + 1
}

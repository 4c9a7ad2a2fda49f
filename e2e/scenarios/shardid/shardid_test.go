package shardid

import "testing"

// Expected values are those of the C++ tests (tests/sharding/shard_id_test.cc), computed with Java.
func TestMatchesJava(t *testing.T) {
	hashes := map[string]int32{
		"": 0, "a": 97, "order:12345": 851011847, "guild1": -1234877794, "user-42": -147182656,
		"zzzzzzzz": -1910022912, "polygenelubricants": -2147483648,
	}
	for id, want := range hashes {
		if got := JavaHashCode(id); got != want {
			t.Errorf("JavaHashCode(%q) = %d, want %d", id, got, want)
		}
	}
	shards := []struct {
		id      string
		n, want int
	}{
		{"a", 300, 98}, {"guild1", 300, 95}, {"user-42", 300, 257}, {"guild1", 1000, 795},
		{"zzzzzzzz", 300, 13}, {"polygenelubricants", 300, 249}, {"polygenelubricants", 1000, 649},
	}
	for _, c := range shards {
		if got := Of(c.id, c.n); got != c.want {
			t.Errorf("Of(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}

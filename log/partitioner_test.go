package log

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// kafkaMurmur2 are the cases of Kafka's own test of Utils.murmur2
// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
// testMurmur2), also used by franz-go (pkg/kgo/partitioner_test.go,
// TestMurmur2KafkaVectors). The values are Java ints.
var kafkaMurmur2 = []struct {
	key  string
	hash int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
}

func TestMurmur2KafkaVectors(t *testing.T) {
	for _, c := range kafkaMurmur2 {
		require.Equal(t, c.hash, int32(murmur2([]byte(c.key))), "murmur2(%q)", c.key)
	}
}

func TestKeyPartition(t *testing.T) {
	// toPositive(hash) % n for Kafka's hashes above, worked out from the
	// Java ints (not from murmur2 here): the partition the Java client picks.
	cases := []struct {
		key  string
		n    int
		want int
	}{
		{"21", 1, 0}, {"21", 3, 0}, {"21", 50, 40},
		{"foobar", 10, 6}, {"foobar", 12, 6}, {"foobar", 50, 16},
		{"a-little-bit-long-string", 3, 2}, {"a-little-bit-long-string", 12, 8},
		{"a-little-bit-longer-string", 2, 1}, {"a-little-bit-longer-string", 6, 5}, {"a-little-bit-longer-string", 10, 9},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 10, 7}, {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 50, 27},
		{"abc", 6, 3}, {"abc", 10, 7},
	}
	for _, c := range cases {
		require.Equal(t, c.want, KeyPartition([]byte(c.key), c.n), "KeyPartition(%q, %d)", c.key, c.n)
	}
	// Negative hashes are masked, never negated: a hash with the sign bit
	// set lands where toPositive puts it.
	for _, c := range kafkaMurmur2 {
		for n := 1; n <= 64; n++ {
			p := KeyPartition([]byte(c.key), n)
			require.True(t, p >= 0 && p < n)
			require.Equal(t, int(uint32(c.hash)&0x7fffffff)%n, p)
		}
	}
	// An empty key is a key (Kafka hashes it; only null is "no key"):
	// murmur2 of no bytes is 275646681 (0x106e08d9), the seed mixed with
	// length 0, as other Kafka-compatible clients test it.
	require.Equal(t, uint32(275646681), murmur2([]byte{}))
	require.Equal(t, 2, KeyPartition([]byte{}, 7))
}

func TestNextSticky(t *testing.T) {
	require.Equal(t, 0, nextSticky(-1, 1))
	require.Equal(t, 0, nextSticky(0, 1))
	for n := 2; n <= 5; n++ {
		seen := map[int]bool{}
		prev := -1
		for i := 0; i < 400; i++ {
			p := nextSticky(prev, n)
			require.True(t, p >= 0 && p < n)
			require.NotEqual(t, prev, p, "a switch never stays on the same partition")
			seen[p] = true
			prev = p
		}
		require.Len(t, seen, n, "every partition gets its turn")
	}
	// A stale previous partition (the topic shrank) is just "none".
	p := nextSticky(9, 3)
	require.True(t, p >= 0 && p < 3)
}

func TestPartitionerString(t *testing.T) {
	require.Equal(t, "default", PartitionerDefault.String())
	require.Equal(t, "manual", PartitionerManual.String())
	require.Equal(t, "round-robin", PartitionerRoundRobin.String())
	require.Equal(t, "Partitioner(7)", Partitioner(7).String())
}

func BenchmarkMurmur2(b *testing.B) {
	key := []byte("customer-0000012345")
	b.SetBytes(int64(len(key)))
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		sink += murmur2(key)
	}
	_ = sink
}

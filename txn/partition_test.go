package txn

import "testing"

// The expected partitions are Kafka's: Utils.abs of
// String.hashCode mod 50 (hash values computed by the JVM's formula).
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		id   string
		n    int
		want int
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},               // "a".hashCode() = 97
		{"ab", 50, (97*31 + 98) % 50},    // 3105
		{"orders-etl", 1, 0},             // one partition: always 0
		{"polygenelubricants", 50, 0},    // hashCode = Integer.MIN_VALUE → abs 0
		{"txn-1", 50, 110810510 % 50},    // positive
		{"etl-txn", 50, 1429231046 % 50}, // hashCode -1429231046
		{"€", 50, 8364 % 50},             // one UTF-16 unit
		{"\U0001F600", 50, 1772899 % 50}, // a surrogate pair: 55357*31 + 56832
		{"x", 0, 0},
	} {
		if got := PartitionFor(c.id, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}

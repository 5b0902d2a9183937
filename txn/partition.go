package txn

import (
	"math"
	"unicode/utf16"
)

// PartitionFor returns the partition of __transaction_state, of n, that
// holds a transactional id: Kafka's Utils.abs(transactionalId.hashCode) %
// n, with Java's String.hashCode over UTF-16 code units, so that Kafka's
// tools agree on which coordinator owns an id. n <= 0 gives 0.
func PartitionFor(transactionalID string, n int) int {
	if n <= 0 {
		return 0
	}
	var h int32
	for _, u := range utf16.Encode([]rune(transactionalID)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == math.MinInt32:
		h = 0 // Kafka's Utils.abs
	case h < 0:
		h = -h
	}
	return int(h) % n
}

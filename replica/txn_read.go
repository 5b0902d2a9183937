package replica

import "github.com/strata-log/strata/log"

// READ_COMMITTED reads on a member (log.FetchTxnCommitted): a partition's
// leader serves records below its last stable offset, which on a
// replicated partition is also below the high watermark — a transaction
// whose marker the ISR does not have yet is still open for a reader — with
// the aborted transactions of the range read, from its .txnindex files.
// The followers' logs have the same markers and .txnindex entries
// (log.Partition.AppendAsFollower), so a new leader answers the same.

// readCommittedBound is the offset a READ_COMMITTED fetch of p reads
// below: its last stable offset, at most hw.
func readCommittedBound(p *log.Partition, hw int64) int64 {
	return min(p.LastStableOffset(), hw)
}

// abortedBelow returns the aborted transactions of p that overlap
// [from, to): a reader skips their batches.
func abortedBelow(p *log.Partition, from, to int64) ([]log.AbortedTransaction, error) {
	return p.AbortedTransactions(nil, from, to)
}

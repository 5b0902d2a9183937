package kafka

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/txn"
)

// TxnRouter is implemented by a TxnBackend whose transactional ids are
// spread over the nodes of a cluster (a replica member's adapter), as a
// GroupRouter's groups are: each id has one coordinator, on the node that
// leads its partition of __transaction_state, and it moves. A server over
// a TxnRouter answers FindCoordinator (key type 1) with the node it names,
// the transaction APIs NOT_COORDINATOR on the other nodes (its
// TxnCoordinator returns an error matching ErrNotCoordinator there),
// ListTransactions with the ids of every coordinator the node runs, and
// checks a transactional produce at the id's coordinator wherever it runs.
type TxnRouter interface {
	// TxnCoordinatorNode returns the node that coordinates
	// transactionalID; ok false when none is known now. It may first
	// create what coordination needs (__transaction_state), bounded by ctx.
	TxnCoordinatorNode(ctx context.Context, transactionalID string) (node int32, ok bool)
	// TxnCoordinators returns every transaction coordinator this node
	// runs now.
	TxnCoordinators() []*txn.Coordinator
	// VerifyTxnPartition checks at the coordinator of transactionalID
	// that tp is in the producer's transaction (KIP-890 part 1), or with
	// add adds it (part 2): nil, or the coordinator's answer as its
	// sentinel (txn.ErrTransactionAbortable, txn.ErrProducerFenced, ...).
	VerifyTxnPartition(ctx context.Context, transactionalID string, pid log.ProducerID, tp log.TopicPartition, add bool) error
}

// findRoutedTxnCoordinator answers FindCoordinator for a transactional id
// on a TxnRouter: the node it names and its address.
func (s *Server) findRoutedTxnCoordinator(ctx context.Context, r TxnRouter, id string) (node int32, host string, port int32, code int16) {
	node, ok := r.TxnCoordinatorNode(ctx, id)
	if !ok {
		return -1, "", -1, errCoordinatorNotAvailable
	}
	if node == s.cfg.NodeID {
		host, port := s.advertised()
		return node, host, port, errNone
	}
	if cb := s.caps.cluster; cb != nil {
		for _, b := range cb.ClusterBrokers() {
			if b.ID == node {
				return node, b.Host, b.Port, errNone
			}
		}
	}
	return -1, "", -1, errCoordinatorNotAvailable
}

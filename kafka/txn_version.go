package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/txn"
)

// Transaction version 2 (KIP-890 part 2): the coordinator bumps the
// producer epoch on every EndTxn and answers the new one (txn/machine.go),
// and a produce v12's partitions and a TxnOffsetCommit v5's group are
// added to the transaction by the server that takes them, so ApiVersions
// advertises the finalized feature transaction.version 2, as Kafka 4
// does; clients that read it (kgo, Kafka's Java clients) then skip
// AddPartitionsToTxn and AddOffsetsToTxn. On a standalone broker the adds
// are its own coordinator's; on a cluster member (TxnRouter) they go to
// the transactional id's coordinator wherever it runs
// (TxnRouter.VerifyTxnPartition with add), as Kafka's partition leaders
// and group coordinators send AddPartitionsToTxn v5.

// transactionVersionFeature is the feature's name in ApiVersions.
const transactionVersionFeature = "transaction.version"

// advertisesTV2 reports whether this server finalizes transaction.version
// 2: Config.TransactionVersion asks for it, and it serves transactions
// (coordinating them itself or through a TxnRouter) and keeps
// transactional offsets. The members of a cluster share the setting.
func (s *Server) advertisesTV2() bool {
	return s.cfg.TransactionVersion >= txn.TV2 && s.caps.txns != nil && s.caps.txnOffsets != nil
}

// addTxnFeatures adds transaction.version to an ApiVersions answer: its
// supported range and, finalized, 2.
func (s *Server) addTxnFeatures(resp *kmsg.ApiVersionsResponse) {
	if !s.advertisesTV2() {
		return
	}
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, txn.TV2
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, txn.TV2, txn.TV2
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	if resp.FinalizedFeaturesEpoch < 0 {
		resp.FinalizedFeaturesEpoch = 0
	}
}

// addTxnOffsets is TxnOffsetCommit v5's implicit AddOffsetsToTxn under
// transaction version 2: the group's partition of __consumer_offsets joins
// the producer's transaction before its offsets are written (nothing to
// write if it is in already, as after an AddOffsetsToTxn). It returns the
// code for every partition of the commit: errNone once added.
func (s *Server) addTxnOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string) int16 {
	if !s.advertisesTV2() {
		return errNone // the client added the group with AddOffsetsToTxn
	}
	gp := s.groupOffsetsPartition(ctx, group)
	if r := s.caps.txnRouter; r != nil {
		// The transaction's coordinator may be another node's.
		p := log.TopicPartition{Topic: log.OffsetsTopic, Partition: gp}
		err := addRouted(ctx, r, id, log.ProducerID{ID: producerID, Epoch: epoch}, p)
		switch {
		case err == nil:
			return errNone
		case CoordinatorMoved(err) || errors.Is(err, log.ErrTxnCoordinatorLoading) || errors.Is(err, log.ErrUnreachable):
			return errCoordinatorLoadInProgress // as below: the client retries
		}
		return txnErrorCode(err, true)
	}
	coord, code := s.txnCoordinator(id)
	if code != errNone {
		return errCoordinatorLoadInProgress // the group's coordinator is right; the transaction's is not ready
	}
	err := retryIdle(ctx, coord, id, func() error { // as a produce v12 (txn_produce.go)
		return coord.AddOffsets(ctx, id, producerID, epoch, gp, txn.TV2)
	})
	if err != nil {
		return txnErrorCode(err, true)
	}
	return errNone
}

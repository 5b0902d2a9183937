package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleProduce appends each partition's batch, as the client sent it, to
// the backend. Errors are per partition. With acks=0 nothing is answered;
// if a partition failed the connection is closed instead, as Kafka does, so
// that the client notices.
func handleProduce(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ProduceRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var acks log.Acks
	ackErr, ackMsg := errNone, ""
	switch req.Acks {
	case -1:
		acks = log.AcksAll
	case 1:
		acks = log.AcksLeader
	case 0:
		acks = log.AcksNone
	default:
		ackErr, ackMsg = errInvalidRequiredAcks, "acks must be -1, 0 or 1"
	}
	switch {
	case req.TransactionID != nil && s.caps.txns == nil:
		ackErr, ackMsg = errTransactionalIDAuthorizationFailed, "transactions are not supported"
	case req.TransactionID == nil && hasTransactionalRecords(req):
		// Kafka refuses transactional records without a transactional
		// id the same way: no coordinator would ever end them, and the
		// partition's last stable offset would stay behind them.
		ackErr, ackMsg = errTransactionalIDAuthorizationFailed, "transactional records without a transactional id"
	}
	// A produce read whole is carried out even if its connection then
	// closes (acks=0 clients close right after sending).
	ctx = context.WithoutCancel(ctx)
	if acks == log.AcksAll && req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	byID := req.Version >= 13
	type job struct {
		tp   log.TopicPartition
		recs []byte
		t, p int // where its result goes in resp
	}
	var jobs []job
	distinct := map[log.TopicPartition]bool{}
	for i := range req.Topics {
		rt := &req.Topics[i]
		name := rt.Topic
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		topicErr, topicMsg := ackErr, ackMsg
		if byID {
			var ok bool
			if name, ok = s.topicName(rt.TopicID); !ok && topicErr == errNone {
				topicErr, topicMsg = errUnknownTopicID, "unknown topic id"
			}
		} else if err := log.ValidTopicName(name); err != nil && topicErr == errNone {
			topicErr, topicMsg = errorCode(err), err.Error()
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
			p.ErrorCode = topicErr
			if topicErr != errNone {
				p.ErrorMessage = kmsg.StringPtr(topicMsg)
			} else {
				tp := log.TopicPartition{Topic: name, Partition: int(rp.Partition)}
				jobs = append(jobs, job{tp: tp, recs: rp.Records, t: i, p: j})
				distinct[tp] = true
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	// The next produce of the connection to these partitions may start
	// once every batch here has its place (see internal/order): each job
	// tells when the backend says so, or at the latest when it returns.
	jobCtx := func() context.Context { return ctx }
	if len(jobs) > 1 {
		var left atomic.Int32
		left.Store(int32(len(jobs)))
		detached := order.Detached(ctx)
		jobCtx = func() context.Context {
			return order.With(detached, func() {
				if left.Add(-1) == 0 {
					order.Placed(ctx)
				}
			})
		}
	}
	run := func(jb job) {
		jctx := jobCtx()
		defer order.Placed(jctx)
		p := &resp.Topics[jb.t].Partitions[jb.p]
		if req.TransactionID != nil {
			// In the producer's transaction? (KIP-890, txn_produce.go)
			defer s.caps.txnEnds.produce(*req.TransactionID)()
			if code, msg := s.checkTxnProduce(jctx, *req.TransactionID, jb.tp, jb.recs, req.Version); code != errNone {
				p.ErrorCode, p.ErrorMessage = code, msg
				return
			}
		}
		p.ErrorCode, p.BaseOffset, p.LogStartOffset, p.ErrorMessage = s.produce(jctx, jb.tp, jb.recs, acks)
	}
	if len(jobs) > 1 && len(distinct) == len(jobs) && acks != log.AcksNone {
		// Partitions are appended (and, with acks=all, replicated or
		// fsynced) concurrently; a partition named twice keeps the
		// request's order, sequentially.
		var wg sync.WaitGroup
		for _, jb := range jobs {
			wg.Go(func() { run(jb) })
		}
		wg.Wait()
	} else {
		for _, jb := range jobs {
			run(jb)
		}
	}
	failed := false
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != errNone {
				failed = true
				c.logger.Debug("kafka: produce", "topic", t.Topic, "partition", p.Partition, "code", p.ErrorCode)
			}
		}
	}
	if req.Acks == 0 {
		return reply{none: true, closeAfter: failed}
	}
	return reply{resp: resp}
}

// produce appends one partition's records.
func (s *Server) produce(ctx context.Context, tp log.TopicPartition, records []byte, acks log.Acks) (code int16, base, start int64, msg *string) {
	if len(records) == 0 {
		return errCorruptMessage, -1, -1, kmsg.StringPtr("no record batch")
	}
	base, err := s.b.Produce(ctx, tp, records, acks)
	if err != nil {
		code := errorCode(err)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			code = errCorruptMessage // a batch shorter than it says
		}
		if code == errUnknownServerError && errors.Is(err, context.Canceled) && ctx.Err() != nil {
			// The wait for the ISR was given up because the connection
			// or the server stopped reading (a member that stops answers
			// what is parked): the outcome is unknown, and the client is
			// to retry at the partition's next leader, as Kafka answers
			// the produces of a leader that stops.
			code = errNotLeaderOrFollower
		}
		return code, -1, -1, kmsg.StringPtr(err.Error())
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Produced(tp.Topic, batchRecords(records), int64(len(records)))
	}
	start, err = s.b.ListOffset(ctx, tp, log.EarliestOffset)
	if err != nil {
		start = -1
	}
	return errNone, base, start, nil
}

// hasTransactionalRecords says whether a partition's first batch is
// transactional (attribute bit 4), as Kafka checks a produce request: a
// v2 batch header has its attributes at byte 21.
func hasTransactionalRecords(req *kmsg.ProduceRequest) bool {
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			if r := p.Records; len(r) >= 23 && r[16] == 2 && binary.BigEndian.Uint16(r[21:23])&0x10 != 0 {
				return true
			}
		}
	}
	return false
}

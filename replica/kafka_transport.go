package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/internal/wire"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/transport"
)

// kafkaTransport is the Transport over the Kafka protocol: each call is a
// Kafka request (Fetch with the replica id, OffsetForLeaderEpoch, Produce,
// Fetch, ListOffsets, by franz-go's kmsg codecs) on a connection to the
// leader's data-plane address as the metadata has it, served there by its
// kafka.Server.
type kafkaTransport struct {
	b    *Broker
	dial func(ctx context.Context, addr string) (net.Conn, error)
	fmt  *kmsg.RequestFormatter

	mu     sync.Mutex
	idle   map[int][]*kconn
	open   map[*kconn]struct{}
	pipes  map[pipeKey]*pipeConn // idempotent produces (kafka_pipeline.go)
	closed bool
}

const maxIdleConns = 4

func newKafkaTransport(b *Broker, dial func(ctx context.Context, addr string) (net.Conn, error)) *kafkaTransport {
	return &kafkaTransport{
		b: b, dial: dial,
		fmt:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("strata-broker-%d", b.cfg.ID))),
		idle: map[int][]*kconn{}, open: map[*kconn]struct{}{}, pipes: map[pipeKey]*pipeConn{},
	}
}

// close closes every connection; calls in flight fail.
func (t *kafkaTransport) close() {
	t.mu.Lock()
	t.closed = true
	for c := range t.open {
		c.nc.Close()
	}
	for _, p := range t.pipes {
		p.nc.Close()
	}
	clear(t.idle)
	clear(t.pipes)
	t.mu.Unlock()
}

type kconn struct {
	nc   net.Conn
	corr int32
	buf  []byte
}

func (t *kafkaTransport) get(ctx context.Context, id int) (*kconn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, log.ErrClosed
	}
	if cs := t.idle[id]; len(cs) > 0 {
		c := cs[len(cs)-1]
		t.idle[id] = cs[:len(cs)-1]
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	nc, err := t.dialBroker(ctx, id)
	if err != nil {
		return nil, err
	}
	c := &kconn{nc: nc}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		nc.Close()
		return nil, log.ErrClosed
	}
	t.open[c] = struct{}{}
	return c, nil
}

// dialBroker connects to broker id's data plane, as the metadata has it.
func (t *kafkaTransport) dialBroker(ctx context.Context, id int) (net.Conn, error) {
	bi, ok := t.b.img.Load().Broker(id)
	if !ok || bi.Addr == "" {
		return nil, fmt.Errorf("%w: broker %d has no known address", ErrUnreachable, id)
	}
	nc, err := t.dial(ctx, bi.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial broker %d at %s: %w", ErrUnreachable, id, bi.Addr, err)
	}
	return nc, nil
}

func (t *kafkaTransport) put(id int, c *kconn, broken bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if broken || t.closed || len(t.idle[id]) >= maxIdleConns {
		delete(t.open, c)
		c.nc.Close()
		return
	}
	t.idle[id] = append(t.idle[id], c)
}

// do sends req to broker id and reads its response.
func (t *kafkaTransport) do(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	return t.doInto(ctx, id, req, nil)
}

// doInto is do reading the response into *buf (see roundTripInto).
func (t *kafkaTransport) doInto(ctx context.Context, id int, req kmsg.Request, buf *[]byte) (kmsg.Response, error) {
	c, err := t.get(ctx, id)
	if err != nil {
		return nil, err
	}
	resp, err := t.roundTripInto(ctx, c, req, buf)
	t.put(id, c, err != nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: broker %d: %w", ErrUnreachable, id, err)
	}
	return resp, nil
}

// roundTripInto sends req on c and reads its response, into *buf (grown
// as needed) when buf is not nil: the response then aliases it.
func (t *kafkaTransport) roundTripInto(ctx context.Context, c *kconn, req kmsg.Request, buf *[]byte) (kmsg.Response, error) {
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Now()) })
	defer stop()
	c.corr++
	c.buf = t.fmt.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.nc.Write(c.buf); err != nil {
		return nil, err
	}
	return readResponse(c.nc, req, c.corr, buf)
}

// readResponse reads the response to req, sent with correlation id corr,
// from nc: into *buf (grown as needed) when buf is not nil.
func readResponse(nc net.Conn, req kmsg.Request, corr int32, buf *[]byte) (kmsg.Response, error) {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("replica: response of %d bytes", n)
	}
	var body []byte
	if buf == nil {
		body = make([]byte, n)
	} else {
		if cap(*buf) < int(n) {
			*buf = make([]byte, n)
		}
		body = (*buf)[:n]
	}
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("replica: response to request %d, want %d", got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		var ok bool
		if body, ok = wire.SkipTags(body); !ok {
			return nil, fmt.Errorf("replica: malformed tagged fields in a %T header", resp)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("replica: decode %T: %w", resp, err)
	}
	return resp, nil
}

// topicIndex groups partitions by topic in first-seen order, as Kafka's
// requests list them, and finds each partition's place in the response.
type topicIndex struct {
	order []string
	byTop map[string][]int // topic → indexes into the caller's partitions
}

func indexTopics(tps []log.TopicPartition) topicIndex {
	ix := topicIndex{byTop: map[string][]int{}}
	for i, tp := range tps {
		if _, ok := ix.byTop[tp.Topic]; !ok {
			ix.order = append(ix.order, tp.Topic)
		}
		ix.byTop[tp.Topic] = append(ix.byTop[tp.Topic], i)
	}
	return ix
}

func (t *kafkaTransport) ReplicaFetch(ctx context.Context, leader int, req transport.ReplicaFetchRequest) (transport.ReplicaFetchResponse, error) {
	return t.replicaFetchInto(ctx, leader, req, nil)
}

// replicaFetchInto is ReplicaFetch reading the response into *buf (nil: a
// new buffer): the records of the answer alias it until the caller reads
// into it again. A fetcher fetches into a buffer of its own, so that the
// bytes it appends to its logs are read from the socket once and never
// copied in between, and it allocates nothing per response.
func (t *kafkaTransport) replicaFetchInto(ctx context.Context, leader int, req transport.ReplicaFetchRequest, buf *[]byte) (transport.ReplicaFetchResponse, error) {
	tps := make([]log.TopicPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		tps[i] = p.TopicPartition
	}
	ix := indexTopics(tps)
	kr := kmsg.NewPtrFetchRequest()
	kr.SetVersion(12)
	kr.ReplicaID, kr.MaxWaitMillis, kr.MinBytes, kr.MaxBytes = int32(req.ReplicaID), int32(req.MaxWait), 1, 50<<20
	kr.SessionEpoch = -1
	for _, name := range ix.order {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = name
		for _, i := range ix.byTop[name] {
			p := req.Partitions[i]
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.CurrentLeaderEpoch, fp.FetchOffset = int32(p.Partition), p.CurrentLeaderEpoch, p.FetchOffset
			fp.LastFetchedEpoch, fp.LogStartOffset, fp.PartitionMaxBytes = p.LastFetchedEpoch, p.LogStartOffset, int32(p.MaxBytes)
			ft.Partitions = append(ft.Partitions, fp)
		}
		kr.Topics = append(kr.Topics, ft)
	}
	r, err := t.doInto(ctx, leader, kr, buf)
	if err != nil {
		return transport.ReplicaFetchResponse{}, err
	}
	kresp := r.(*kmsg.FetchResponse)
	if kresp.ErrorCode != kerr.None {
		return transport.ReplicaFetchResponse{}, errOf(kresp.ErrorCode)
	}
	out := transport.ReplicaFetchResponse{Partitions: make([]transport.ReplicaFetchedPartition, len(req.Partitions))}
	for i := range out.Partitions {
		out.Partitions[i].TopicPartition = tps[i]
		out.Partitions[i].Err = fmt.Errorf("%w: missing from the leader's answer", ErrNotLeader)
	}
	for ti, rt := range kresp.Topics {
		if ti >= len(ix.order) {
			break
		}
		idx := ix.byTop[ix.order[ti]]
		for pi, rp := range rt.Partitions {
			if pi >= len(idx) {
				break
			}
			o := &out.Partitions[idx[pi]]
			o.Err = errOf(rp.ErrorCode)
			if errors.Is(o.Err, log.ErrOffsetOutOfRange) {
				o.Err = ErrOffsetOutOfRange
			}
			o.HighWatermark, o.LogStartOffset = rp.HighWatermark, rp.LogStartOffset
			o.LogEndOffset = rp.HighWatermark // not on the wire; only used with OffsetOutOfRange, see below
			if d := rp.DivergingEpoch; d.Epoch >= 0 || d.EndOffset >= 0 {
				o.Diverging = &machine.EpochEnd{Epoch: d.Epoch, EndOffset: d.EndOffset}
			}
			if len(rp.RecordBatches) > 0 {
				o.Records = log.BatchesOf(rp.RecordBatches)
			}
		}
	}
	return out, nil
}

func (t *kafkaTransport) EpochEnd(ctx context.Context, leader int, req transport.EpochEndRequest) (transport.EpochEndAnswer, error) {
	kr := kmsg.NewPtrOffsetForLeaderEpochRequest()
	kr.SetVersion(4)
	kr.ReplicaID = int32(t.b.cfg.ID)
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = req.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = int32(req.Partition), req.CurrentLeaderEpoch, req.Epoch
	rt.Partitions = append(rt.Partitions, rp)
	kr.Topics = append(kr.Topics, rt)
	r, err := t.do(ctx, leader, kr)
	if err != nil {
		return transport.EpochEndAnswer{}, err
	}
	resp := r.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return transport.EpochEndAnswer{}, fmt.Errorf("%w: malformed OffsetForLeaderEpoch answer", ErrUnreachable)
	}
	p := resp.Topics[0].Partitions[0]
	return transport.EpochEndAnswer{Err: errOf(p.ErrorCode), End: machine.EpochEnd{Epoch: p.LeaderEpoch, EndOffset: p.EndOffset}}, nil
}

func (t *kafkaTransport) Produce(ctx context.Context, leader int, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	kr := kmsg.NewPtrProduceRequest()
	kr.SetVersion(9)
	kr.Acks = 1
	if acks == log.AcksAll {
		kr.Acks = -1
	}
	kr.TimeoutMillis = int32(t.b.cfg.ProduceTimeout.Milliseconds())
	if d, ok := ctx.Deadline(); ok {
		kr.TimeoutMillis = int32(max(time.Until(d).Milliseconds(), 1))
	}
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = tp.Topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = int32(tp.Partition), batch
	pt.Partitions = append(pt.Partitions, pp)
	kr.Topics = append(kr.Topics, pt)
	kr.TransactionID = t.b.transactionalIDOf(batch) // a transactional batch's (txn_route.go)
	var r kmsg.Response
	var err error
	if k, _, _, ok := orderOf(tp, batch); ok {
		r, err = t.pipelined(ctx, leader, slotOf(k), kr)
	} else {
		r, err = t.do(ctx, leader, kr)
	}
	if err != nil {
		return log.ProduceResult{}, err
	}
	resp := r.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return log.ProduceResult{}, fmt.Errorf("%w: malformed Produce answer", ErrUnreachable)
	}
	p := resp.Topics[0].Partitions[0]
	if err := errOf(p.ErrorCode); err != nil {
		return log.ProduceResult{}, fmt.Errorf("replica: produce at broker %d: %w", leader, err)
	}
	return log.ProduceResult{BaseOffset: p.BaseOffset, LogAppendTime: p.LogAppendTime, LogStartOffset: p.LogStartOffset}, nil
}

func (t *kafkaTransport) Fetch(ctx context.Context, leader int, req log.FetchRequest) (log.FetchResponse, error) {
	tps := make([]log.TopicPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		tps[i] = p.TopicPartition
	}
	ix := indexTopics(tps)
	kr := kmsg.NewPtrFetchRequest()
	kr.SetVersion(12)
	kr.ReplicaID = -1
	kr.MaxWaitMillis, kr.MinBytes, kr.MaxBytes = int32(req.MaxWait.Milliseconds()), int32(max(req.MinBytes, 1)), int32(req.MaxBytes)
	if req.MaxWait == 0 {
		kr.MaxWaitMillis = 500
	}
	if req.MaxBytes <= 0 {
		kr.MaxBytes = 50 << 20
	}
	kr.SessionEpoch = -1
	if req.Isolation == log.FetchTxnCommitted {
		kr.IsolationLevel = 1 // read_committed: below the LSO, with the aborted transactions (txn_read.go)
	}
	partMax := req.PartitionMaxBytes
	if partMax <= 0 {
		partMax = 1 << 20
	}
	for _, name := range ix.order {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = name
		for _, i := range ix.byTop[name] {
			p := req.Partitions[i]
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = int32(p.Partition), p.Offset, int32(partMax)
			if p.MaxBytes > 0 {
				fp.PartitionMaxBytes = int32(p.MaxBytes)
			}
			fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
			ft.Partitions = append(ft.Partitions, fp)
		}
		kr.Topics = append(kr.Topics, ft)
	}
	r, err := t.do(ctx, leader, kr)
	if err != nil {
		return log.FetchResponse{}, err
	}
	kresp := r.(*kmsg.FetchResponse)
	if kresp.ErrorCode != kerr.None {
		return log.FetchResponse{}, errOf(kresp.ErrorCode)
	}
	out := log.FetchResponse{Partitions: make([]log.FetchedPartition, len(req.Partitions))}
	for i := range out.Partitions {
		out.Partitions[i].TopicPartition = tps[i]
		out.Partitions[i].Err = log.ErrNotLeader
	}
	for ti, rt := range kresp.Topics {
		if ti >= len(ix.order) {
			break
		}
		idx := ix.byTop[ix.order[ti]]
		for pi, rp := range rt.Partitions {
			if pi >= len(idx) {
				break
			}
			o := &out.Partitions[idx[pi]]
			o.Err = errOf(rp.ErrorCode)
			if errors.Is(o.Err, ErrOffsetOutOfRange) {
				o.Err = &log.OffsetOutOfRangeError{Requested: req.Partitions[idx[pi]].Offset, Start: rp.LogStartOffset, End: rp.HighWatermark}
			}
			o.HighWatermark, o.LastStableOffset, o.LogStartOffset = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
			for _, a := range rp.AbortedTransactions {
				o.AbortedTransactions = append(o.AbortedTransactions, log.AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
			}
			if len(rp.RecordBatches) > 0 {
				o.Records = log.BatchesOf(rp.RecordBatches)
			}
		}
	}
	return out, nil
}

func (t *kafkaTransport) ListOffset(ctx context.Context, leader int, tp log.TopicPartition, at int64) (int64, error) {
	kr := kmsg.NewPtrListOffsetsRequest()
	kr.SetVersion(4)
	kr.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = tp.Topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = int32(tp.Partition), -1, at
	if at == log.LatestStableOffset {
		kr.IsolationLevel, lp.Timestamp = 1, log.LatestOffset // the LSO, as Kafka asks for it
	}
	lt.Partitions = append(lt.Partitions, lp)
	kr.Topics = append(kr.Topics, lt)
	r, err := t.do(ctx, leader, kr)
	if err != nil {
		return 0, err
	}
	resp := r.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("%w: malformed ListOffsets answer", ErrUnreachable)
	}
	p := resp.Topics[0].Partitions[0]
	if err := errOf(p.ErrorCode); err != nil {
		return 0, err
	}
	return p.Offset, nil
}

func (t *kafkaTransport) DeleteRecords(ctx context.Context, leader int, tp log.TopicPartition, offset int64) (int64, error) {
	kr := kmsg.NewPtrDeleteRecordsRequest()
	kr.SetVersion(1)
	kr.TimeoutMillis = 30000
	if d, ok := ctx.Deadline(); ok {
		kr.TimeoutMillis = int32(max(time.Until(d).Milliseconds(), 1))
	}
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = int32(tp.Partition), offset
	rt.Partitions = append(rt.Partitions, rp)
	kr.Topics = append(kr.Topics, rt)
	r, err := t.do(ctx, leader, kr)
	if err != nil {
		return 0, err
	}
	resp := r.(*kmsg.DeleteRecordsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("%w: malformed DeleteRecords answer", ErrUnreachable)
	}
	p := resp.Topics[0].Partitions[0]
	if err := errOf(p.ErrorCode); err != nil {
		return 0, err
	}
	return p.LowWatermark, nil
}

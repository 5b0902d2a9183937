package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DialConfig configures a Client.
type DialConfig struct {
	// Seeds are host:port addresses of brokers of the cluster; the others
	// are learned from Metadata.
	Seeds []string
	// TLS, when set, makes every connection TLS.
	TLS *tls.Config
	// SASL, when set, authenticates every connection.
	SASL *DialSASL
	// ClientID names the client in the brokers' logs; "" → "strata".
	ClientID string
	// Dial, when set, opens every connection (a test network's, a
	// cluster member's own); nil → TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// RequestTimeout is how long a fetch may wait for its answer beyond
	// the MaxWait the broker may take, and a Metadata request at most
	// (capped at 5 s), before the connection is given up on as a stopped
	// broker's and the request retried elsewhere (Kafka's
	// request.timeout.ms); 0 → 30 s.
	RequestTimeout time.Duration
}

// requestTimeout is DialConfig.RequestTimeout, defaults applied.
func (c *Client) requestTimeout() time.Duration {
	if c.cfg.RequestTimeout > 0 {
		return c.cfg.RequestTimeout
	}
	return retryLimit
}

// Versions the client speaks at most: before topic ids (Fetch and
// Produce v13) and within what it was tested with.
const (
	clientProduceMax     = 12
	clientFetchMax       = 12
	clientListOffsetsMax = 6
	clientMetadataMax    = 12
)

// ErrGroupsUnsupported was returned by the consumer-group methods of a
// Client before they were built.
//
// Deprecated: no method returns it; the Client speaks Kafka's group
// protocol.
var ErrGroupsUnsupported = errors.New("kafka: consumer groups over the Kafka protocol are not supported yet")

// Client is a log.Client that talks to any Kafka-protocol cluster:
// requests go to each partition's leader, learned from Metadata and
// refreshed when a broker says it is not the leader, and group requests to
// the group's coordinator (see client_group.go). A leader or coordinator
// that moved or died, a broker that refuses or drops the connection, a
// topic still being created, are retried within the caller's context with
// Kafka's backoff (client_retry.go); a produce that may have been written
// is sent again only if its batch is idempotent. Errors of connections
// match log.ErrUnreachable.
type Client struct {
	cfg DialConfig

	mu      sync.Mutex
	closed  bool
	brokers map[int32]string            // node id → host:port
	leaders map[string][]int32          // topic → leader of each partition
	conns   map[connKey]*brokerConn     // by address and lane
	dialing map[connKey]*sync.WaitGroup // connections being dialed

	coordinators map[string]string        // group → its coordinator's host:port
	exclusive    map[*brokerConn]struct{} // every connection of the join/sync pool
	idle         map[string][]*brokerConn // the pool's idle connections, by address

	ids topicIDs // topic ids of the consumer group protocol (client_group848.go)

	txnIDs map[int64]string // producer id → its transactional id (client_txn.go)

	shares shareSessions // share sessions (client_share.go)
}

var _ log.Client = (*Client)(nil)

// Dial connects to the first seed that answers and loads the cluster's
// metadata.
func Dial(ctx context.Context, cfg DialConfig) (*Client, error) {
	if len(cfg.Seeds) == 0 {
		return nil, fmt.Errorf("%w: no seed brokers", ErrInvalidConfig)
	}
	c := &Client{
		cfg:     cfg,
		brokers: map[int32]string{},
		leaders: map[string][]int32{},
		conns:   map[connKey]*brokerConn{},
		dialing: map[connKey]*sync.WaitGroup{},

		coordinators: map[string]string{},
		exclusive:    map[*brokerConn]struct{}{},
		idle:         map[string][]*brokerConn{},
	}
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[connKey]*brokerConn{}
	exclusive := c.exclusive
	c.exclusive, c.idle = map[*brokerConn]struct{}{}, map[string][]*brokerConn{}
	c.mu.Unlock()
	for _, bc := range conns {
		bc.close()
	}
	for bc := range exclusive {
		bc.close() // a join or sync waiting on it fails
	}
	return nil
}

// connKey names one of the client's shared connections: a broker's
// address and the lane of requests it carries.
type connKey struct {
	addr string
	lane lane
}

// lane is a kind of requests that share a connection. A broker answers
// a connection's requests in order, so a long-polling fetch would hold back
// whatever is behind it: fetches, produces and the rest each have a
// connection to a broker, as Kafka's clients do.
type lane int8

const (
	laneControl lane = iota // metadata, list offsets, coordinator look-ups and group requests
	laneProduce
	laneFetch
)

// conn returns the control connection to addr, dialing it if needed.
func (c *Client) conn(ctx context.Context, addr string) (*brokerConn, error) {
	return c.laneConn(ctx, addr, laneControl)
}

// laneConn returns the connection of a lane to addr, dialing it if
// needed.
func (c *Client) laneConn(ctx context.Context, addr string, l lane) (*brokerConn, error) {
	key := connKey{addr, l}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("kafka: client: %w", log.ErrClosed)
		}
		if bc := c.conns[key]; bc != nil && !bc.broken() {
			c.mu.Unlock()
			return bc, nil
		}
		if wg := c.dialing[key]; wg != nil {
			c.mu.Unlock()
			wg.Wait() // another caller dials it
			continue
		}
		wg := &sync.WaitGroup{}
		wg.Add(1)
		c.dialing[key] = wg
		old := c.conns[key]
		delete(c.conns, key)
		c.mu.Unlock()
		if old != nil {
			old.close()
		}
		bc, err := dialBroker(ctx, addr, c.cfg)
		c.mu.Lock()
		delete(c.dialing, key)
		wg.Done()
		if err == nil {
			if c.closed {
				c.mu.Unlock()
				bc.close()
				return nil, fmt.Errorf("kafka: client: %w", log.ErrClosed)
			}
			c.conns[key] = bc
		}
		c.mu.Unlock()
		return bc, err
	}
}

// anyConn returns a connection to a known broker or a seed.
func (c *Client) anyConn(ctx context.Context) (*brokerConn, error) {
	c.mu.Lock()
	addrs := make([]string, 0, len(c.brokers)+len(c.cfg.Seeds))
	for _, a := range c.brokers {
		if bc := c.conns[connKey{a, laneControl}]; bc != nil && !bc.broken() {
			c.mu.Unlock()
			return bc, nil // connected already: no dial to a broker that may be gone
		}
		addrs = append(addrs, a)
	}
	c.mu.Unlock()
	addrs = append(addrs, c.cfg.Seeds...)
	var errs []error
	for _, a := range addrs {
		bc, err := c.conn(ctx, a)
		if err == nil {
			return bc, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("kafka: no broker reachable: %w", errors.Join(errs...))
}

// metadataTimeout bounds a Metadata request: a broker that does not
// answer one within it (a stopped process, whose connection still looks
// open) is given up on and another asked.
const metadataTimeout = 5 * time.Second

// refresh reloads the metadata of every topic, from any broker that
// answers.
func (c *Client) refresh(ctx context.Context) error {
	var resp kmsg.Response
	var err error
	for range 3 { // a connection found broken on the way: another broker
		var bc *brokerConn
		if bc, err = c.anyConn(ctx); err != nil {
			return err
		}
		req := kmsg.NewPtrMetadataRequest()
		if resp, err = bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout())); err == nil || !errors.Is(err, errConnClosed) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("kafka: metadata: %w", err)
	}
	m := resp.(*kmsg.MetadataResponse)
	brokers := map[int32]string{}
	for _, b := range m.Brokers {
		brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	leaders := map[string][]int32{}
	for _, t := range m.Topics {
		if t.Topic == nil || t.ErrorCode != errNone {
			continue
		}
		ls := make([]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			if int(p.Partition) < len(ls) && p.Partition >= 0 {
				ls[p.Partition] = p.Leader
			}
		}
		leaders[*t.Topic] = ls
	}
	c.mu.Lock()
	c.brokers, c.leaders = brokers, leaders
	c.mu.Unlock()
	return nil
}

// unknownTopic is the error for a topic the cluster's metadata does not
// list. A listing of every topic leaves out those the user may not
// describe, so the topic is asked for by name, never creating it: a
// refused user gets TOPIC_AUTHORIZATION_FAILED, as Kafka's clients do,
// rather than log.ErrUnknownTopic, which says the topic does not exist.
func (c *Client) unknownTopic(ctx context.Context, topic string) error {
	if c.topicCode(ctx, topic) == kerr.TopicAuthorizationFailed {
		return fmt.Errorf("kafka: topic %s: %w", topic, codeError(kerr.TopicAuthorizationFailed))
	}
	return fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
}

// topicCode is the error code of topic's metadata, asked of any broker;
// errNone when no broker tells.
func (c *Client) topicCode(ctx context.Context, topic string) int16 {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return errNone
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout()))
	if err != nil {
		return errNone
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t.ErrorCode
		}
	}
	return errNone
}

// leader returns a connection to the leader of tp, refreshing the
// metadata once if tp is not known.
func (c *Client) leader(ctx context.Context, tp log.TopicPartition, l lane) (*brokerConn, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		ls, ok := c.leaders[tp.Topic]
		var addr string
		if ok && tp.Partition >= 0 && tp.Partition < len(ls) {
			addr = c.brokers[ls[tp.Partition]]
		}
		c.mu.Unlock()
		if addr != "" {
			return c.laneConn(ctx, addr, l)
		}
		if attempt > 0 {
			if !ok {
				return nil, c.unknownTopic(ctx, tp.Topic)
			}
			if tp.Partition < 0 || tp.Partition >= len(ls) {
				return nil, fmt.Errorf("%w: %s", log.ErrUnknownPartition, tp)
			}
			return nil, fmt.Errorf("%w: %s has no reachable leader", log.ErrNotLeader, tp)
		}
		if err := c.refresh(ctx); err != nil {
			return nil, err
		}
	}
}

// Partitions returns the number of partitions of topic, asking the cluster
// for its metadata when the Client does not know the topic yet: within ctx
// and at most 30 s.
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	c.mu.Lock()
	ls, ok := c.leaders[topic]
	c.mu.Unlock()
	if ok {
		return len(ls), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.refresh(ctx); err != nil {
		return 0, err
	}
	c.mu.Lock()
	ls, ok = c.leaders[topic]
	c.mu.Unlock()
	if !ok {
		return 0, c.unknownTopic(ctx, topic)
	}
	return len(ls), nil
}

// Produce sends one record batch to the partition's leader.
func (c *Client) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	res, err := c.ProduceBatch(ctx, tp, batch, acks)
	return res.BaseOffset, err
}

// ProduceBatch sends one record batch to the partition's leader and returns
// what its Produce response says.
func (c *Client) ProduceBatch(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	req := kmsg.NewPtrProduceRequest()
	switch acks {
	case log.AcksAll:
		req.Acks = -1
	case log.AcksLeader:
		req.Acks = 1
	case log.AcksNone:
		req.Acks = 0
	default:
		return log.ProduceResult{}, fmt.Errorf("%w: acks %v", log.ErrInvalidConfig, acks)
	}
	req.TimeoutMillis = 30000
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(max(time.Until(dl).Milliseconds(), 1))
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = int32(tp.Partition), batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TransactionID = c.transactionalID(batch)
	idempotent := batchProducerID(batch) >= 0
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	r := retrier{ctx: ctx}
	for {
		res, err := c.produceOnce(ctx, tp, req)
		if err == nil {
			return res, nil
		}
		if !idempotent && !notSent(err) && ctx.Err() == nil {
			// It may have been written: sent again it could be
			// stored twice. An idempotent batch carries its producer id
			// and sequence, and the broker appends it once.
			return log.ProduceResult{}, err
		}
		if err := r.retry(err); err != nil {
			return log.ProduceResult{}, err
		}
		c.refreshQuiet(ctx)
	}
}

// withRequestTimeout bounds a request whose ctx has no deadline by Kafka's
// request.timeout.ms.
func withRequestTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, retryLimit)
}

// batchProducerID returns the producer id of an encoded record batch (-1:
// none, not idempotent).
func batchProducerID(b []byte) int64 {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return -1
	}
	return h.ProducerID
}

// refreshQuiet reloads the metadata before a retry; a failure is the next
// attempt's to meet (its broker unreachable, say).
func (c *Client) refreshQuiet(ctx context.Context) {
	_ = c.refresh(ctx)
}

func (c *Client) produceOnce(ctx context.Context, tp log.TopicPartition, req *kmsg.ProduceRequest) (log.ProduceResult, error) {
	bc, err := c.leader(ctx, tp, laneProduce)
	if err != nil {
		return log.ProduceResult{}, err
	}
	if req.Acks == 0 {
		return log.ProduceResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}, bc.send(ctx, req, clientProduceMax)
	}
	resp, err := bc.do(ctx, req, clientProduceMax)
	if err != nil {
		return log.ProduceResult{}, err
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return log.ProduceResult{}, fmt.Errorf("kafka: produce to %s: malformed response", tp)
	}
	p := r.Topics[0].Partitions[0]
	if err := codeError(p.ErrorCode); err != nil {
		return log.ProduceResult{}, fmt.Errorf("kafka: produce to %s: %w", tp, err)
	}
	return log.ProduceResult{BaseOffset: p.BaseOffset, LogAppendTime: p.LogAppendTime, LogStartOffset: p.LogStartOffset}, nil
}

// ListOffset asks the partition's leader for an offset, retrying as Produce
// does within ctx and at most the retry limit (30 s).
func (c *Client) ListOffset(ctx context.Context, tp log.TopicPartition, at int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, retryLimit)
	defer cancel()
	r := retrier{ctx: ctx}
	for {
		off, err := c.listOffsetOnce(ctx, tp, at)
		if err == nil {
			return off, nil
		}
		if err := r.retry(err); err != nil {
			return 0, err
		}
		c.refreshQuiet(ctx)
	}
}

func (c *Client) listOffsetOnce(ctx context.Context, tp log.TopicPartition, at int64) (int64, error) {
	bc, err := c.leader(ctx, tp, laneControl)
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = int32(tp.Partition), at
	if at == log.LatestStableOffset {
		// Kafka asks for it as latest, read_committed.
		req.IsolationLevel, rp.Timestamp = 1, log.LatestOffset
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := bc.do(ctx, req, clientListOffsetsMax)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.ListOffsetsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("kafka: list offsets of %s: malformed response", tp)
	}
	p := r.Topics[0].Partitions[0]
	if err := codeError(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("kafka: list offsets of %s: %w", tp, err)
	}
	if p.Offset < 0 && at >= 0 {
		// No record that recent: the end, as log.Broker answers.
		return c.listOffsetOnce(ctx, tp, log.LatestOffset)
	}
	return p.Offset, nil
}

// Fetch reads the partitions from their leaders, one request per leader,
// in parallel; the response keeps the request's order. A partition that
// fails retriably (its leader moved or died, its broker is unreachable) is
// tried again after a backoff and a metadata refresh, for up to the
// request's MaxWait; past it, it comes back with its error and no records,
// and the caller polls again. Fetch fails only when ctx ends (with ctx's
// error and the last cause).
func (c *Client) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	out := log.FetchResponse{Partitions: make([]log.FetchedPartition, len(req.Partitions))}
	for i, fp := range req.Partitions {
		out.Partitions[i].TopicPartition = fp.TopicPartition
	}
	todo := make([]int, len(req.Partitions))
	for i := range todo {
		todo[i] = i
	}
	wait := req.MaxWait
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	end := time.Now().Add(wait)
	var last error // the last retriable error
	for n := 1; ; n++ {
		byConn := map[*brokerConn][]int{}
		var retry []int
		for _, i := range todo {
			bc, err := c.leader(ctx, req.Partitions[i].TopicPartition, laneFetch)
			if err != nil {
				if expired(ctx) {
					out.Release()
					return log.FetchResponse{}, retryCtxErr(ctx, err, last)
				}
				out.Partitions[i].Err = err
				if retriable(err) {
					retry = append(retry, i)
				}
				continue
			}
			byConn[bc] = append(byConn[bc], i)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var fatal error
		for bc, idx := range byConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				again, err := c.fetchFrom(ctx, bc, req, idx, &out)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && fatal == nil && ctx.Err() != nil {
					fatal = err
				}
				retry = append(retry, again...)
			}()
		}
		wg.Wait()
		if fatal == nil && expired(ctx) && len(retry) > 0 {
			fatal = doneErr(ctx) // the failures may be the deadline's doing
		}
		if fatal != nil {
			out.Release()
			return log.FetchResponse{}, retryCtxErr(ctx, fatal, last)
		}
		if len(retry) == 0 {
			return out, nil
		}
		last = out.Partitions[retry[0]].Err
		left := time.Until(end)
		if left <= 0 {
			c.refreshQuiet(ctx) // for the caller's next poll
			return out, nil
		}
		t := time.NewTimer(min(backoffDelay(n), left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			out.Release()
			return log.FetchResponse{}, retryCtxErr(ctx, nil, last)
		}
		c.refreshQuiet(ctx)
		req.MaxWait = max(time.Until(end), time.Millisecond)
		todo = retry
	}
}

// fetchFrom fetches the partitions idx of req from one broker into out and
// returns those that failed retriably.
func (c *Client) fetchFrom(ctx context.Context, bc *brokerConn, req log.FetchRequest, idx []int, out *log.FetchResponse) ([]int, error) {
	fr := kmsg.NewPtrFetchRequest()
	fr.ReplicaID = -1
	fr.MaxWaitMillis = int32(req.MaxWait.Milliseconds())
	if req.MaxWait <= 0 {
		fr.MaxWaitMillis = 500
	}
	fr.MinBytes = int32(max(req.MinBytes, 1))
	fr.MaxBytes = int32(req.MaxBytes)
	if req.MaxBytes <= 0 {
		fr.MaxBytes = 50 << 20
	}
	partMax := int32(req.PartitionMaxBytes)
	if partMax <= 0 {
		partMax = 1 << 20
	}
	fr.SessionID, fr.SessionEpoch = 0, -1 // no fetch session
	if req.Isolation == log.FetchTxnCommitted {
		fr.IsolationLevel = 1 // read_committed: the broker answers the aborted transactions
	}
	where := map[string]int{} // topic → index in fr.Topics
	for _, i := range idx {
		fp := req.Partitions[i]
		ti, ok := where[fp.Topic]
		if !ok {
			ti = len(fr.Topics)
			where[fp.Topic] = ti
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fp.Topic
			fr.Topics = append(fr.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(fp.Partition), fp.Offset, partMax
		rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
		fr.Topics[ti].Partitions = append(fr.Topics[ti].Partitions, rp)
	}
	// The broker may wait up to MaxWait: give the round trip that long
	// and Kafka's request.timeout.ms more.
	resp, err := bc.doWithin(ctx, fr, clientFetchMax, time.Duration(fr.MaxWaitMillis)*time.Millisecond+c.requestTimeout())
	if err != nil {
		for _, i := range idx {
			out.Partitions[i].Err = err
		}
		if retriable(err) {
			return idx, nil
		}
		return nil, err
	}
	r := resp.(*kmsg.FetchResponse)
	if err := codeError(r.ErrorCode); err != nil {
		for _, i := range idx {
			out.Partitions[i].Err = err
		}
		return nil, nil
	}
	type key struct {
		topic string
		part  int32
	}
	got := map[key]*kmsg.FetchResponseTopicPartition{}
	for ti := range r.Topics {
		for pi := range r.Topics[ti].Partitions {
			p := &r.Topics[ti].Partitions[pi]
			got[key{r.Topics[ti].Topic, p.Partition}] = p
		}
	}
	var again []int
	for _, i := range idx {
		fp := req.Partitions[i]
		dst := &out.Partitions[i]
		p := got[key{fp.Topic, int32(fp.Partition)}]
		if p == nil {
			dst.Err = fmt.Errorf("kafka: fetch %s: missing from the response", fp.TopicPartition)
			continue
		}
		dst.HighWatermark, dst.LastStableOffset, dst.LogStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
		dst.Records, dst.Err = log.BatchesOf(p.RecordBatches), nil
		dst.AbortedTransactions = nil
		for _, a := range p.AbortedTransactions {
			dst.AbortedTransactions = append(dst.AbortedTransactions, log.AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
		if err := codeError(p.ErrorCode); err != nil {
			dst.Records = log.Batches{}
			if errors.Is(err, log.ErrOffsetOutOfRange) {
				err = &log.OffsetOutOfRangeError{Topic: fp.Topic, Partition: fp.Partition, Requested: fp.Offset, Start: p.LogStartOffset, End: p.HighWatermark}
			}
			dst.Err = err
			if retriable(err) {
				again = append(again, i)
			}
		}
	}
	return again, nil
}

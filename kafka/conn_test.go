package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawHeader is a request header as bytes, for frames kmsg would not make.
func rawHeader(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
}

func sized(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func metadataV9() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	return req
}

// Every kind of bad input closes that connection, after the responses
// already due, with a log line; the server goes on serving the others.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	leaktest.Check(t)
	s, b, logs := start(t, Config{MaxRequestBytes: 1024}, logtest.Topic("t", 1))
	flexibleBadTags := append(rawHeader(metadataKey, 9, 1), 0x05) // 5 tags, none there
	cases := []struct {
		name  string
		frame []byte
		log   string
	}{
		{"negative size", []byte{0x80, 0, 0, 0, 1, 2, 3, 4}, "negative size"},
		{"minus one size", []byte{0xff, 0xff, 0xff, 0xff}, "negative size"},
		{"size too small for a header", sized([]byte{0, 3, 0}), "too short"},
		{"empty frame", sized(nil), "too short"},
		{"oversized", binary.BigEndian.AppendUint32(nil, 1025), "larger than the maximum"},
		{"huge", binary.BigEndian.AppendUint32(nil, 1<<31-1), "larger than the maximum"},
		{"client id past the end", sized(append(rawHeader(metadataKey, 1, 1)[:8], 0x00, 0x50, 'a')), "client id"},
		{"bad header tags", sized(flexibleBadTags), "tagged fields"},
		{"unknown api key", sized(rawHeader(9999, 0, 1)), "unknown or unsupported api key"},
		{"negative api key", sized(rawHeader(-3, 0, 1)), "unknown or unsupported api key"},
		{"api not served", sized(rawHeader(22, 0, 1)), "unknown or unsupported api key"},
		{"produce v2", sized(rawHeader(produceKey, 2, 1)), "Produce version 2"},
		{"fetch v3", sized(rawHeader(fetchKey, 3, 1)), "Fetch version 3"},
		{"metadata v13", sized(rawHeader(metadataKey, 13, 1)), "Metadata version 13"},
		{"negative version", sized(rawHeader(metadataKey, -1, 1)), "Metadata version -1"},
		{"garbage body", sized(append(rawHeader(produceKey, 7, 1), "\xff\xff\x00\x01garbage that is no produce"...)), "malformed Produce"},
		{"truncated body", sized(append(rawHeader(createTopicsKey, 4, 1), 0, 0, 0, 9)), "malformed CreateTopics"},
		{"huge array length", sized(append(rawHeader(metadataKey, 1, 1), 0x7f, 0xff, 0xff, 0xff)), "malformed Metadata"},
		{"garbage", sized([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), "kafka:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.Addr())
			// A request before the bad one is answered first.
			corr := c.send(metadataV9())
			c.write(tc.frame)
			c.recv(metadataV9(), corr)
			c.closed()
			require.Contains(t, logs.String(), tc.log)
			// Everyone else is served.
			other := dial(t, s.Addr())
			resp := other.do(metadataV9()).(*kmsg.MetadataResponse)
			require.Len(t, resp.Topics, 1)
		})
	}
	p, _ := b.Partition("t", 0)
	require.Equal(t, int64(0), p.EndOffset())
}

// A frame cut short by the peer closes the connection.
func TestTruncatedFrame(t *testing.T) {
	s, _, _ := start(t, Config{})
	c := dial(t, s.Addr())
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, metadataV9(), 1)
	c.write(frame[:len(frame)-3])
	require.NoError(t, c.nc.(*net.TCPConn).CloseWrite())
	c.closed()
	resp := dial(t, s.Addr()).do(metadataV9()).(*kmsg.MetadataResponse)
	require.NotNil(t, resp)
}

func TestMaxConnections(t *testing.T) {
	leaktest.Check(t)
	s, _, logs := start(t, Config{MaxConnections: 1})
	first := dial(t, s.Addr())
	first.do(metadataV9()) // served, so counted
	second := dial(t, s.Addr())
	second.closed()
	require.Contains(t, logs.String(), "too many connections")
	first.do(metadataV9())
	first.nc.Close()
	// Once the server has let the first go, a new one is served.
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 0
	})
	dial(t, s.Addr()).do(metadataV9())
}

func TestIdleTimeout(t *testing.T) {
	s, _, logs := start(t, Config{IdleTimeout: 50 * time.Millisecond}, logtest.Topic("t", 1))
	began := time.Now() // before the server can arm its deadline
	idle := dial(t, s.Addr())
	idle.closed()
	require.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond)
	require.Contains(t, logs.String(), "idle")

	// Waiting for a response is not idle: a fetch parked for longer than
	// the idle timeout is answered and the connection stays open.
	busy := dial(t, s.Addr())
	resp := busy.do(fetchReq(12, "t", 0, 0, 300*time.Millisecond)).(*kmsg.FetchResponse)
	require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	busy.do(metadataV9())
}

// blockingBackend parks every Fetch until released and records how many
// were in the backend at once.
type blockingBackend struct {
	Backend
	arrived chan chan struct{} // each parked Fetch's own release
	abort   chan struct{}      // closed: every Fetch goes on
	now     atomic.Int32
	most    atomic.Int32
}

func (b *blockingBackend) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	n := b.now.Add(1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	release := make(chan struct{})
	b.arrived <- release
	select {
	case <-release:
	case <-b.abort:
	}
	b.now.Add(-1)
	return b.Backend.Fetch(ctx, req)
}

// The reader stops reading when MaxInFlight requests wait for their
// response: no more than that reach the backend at once.
func TestBackpressure(t *testing.T) {
	leaktest.Check(t)
	broker := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	bb := &blockingBackend{Backend: broker, arrived: make(chan chan struct{}, 100), abort: make(chan struct{})}
	s, err := Listen("127.0.0.1:0", bb, Config{MaxInFlight: 3})
	require.NoError(t, err)
	defer s.Close()
	defer close(bb.abort) // a failed test must not hang in Close
	c := dial(t, s.Addr())
	const n = 12
	req := fetchReq(12, "t", 0, 0, 0)
	req.MinBytes = 0
	var corrs []int32
	for range n {
		corrs = append(corrs, c.send(req))
	}
	// Rounds: three requests reach the backend and no more; once they are
	// released and answered, the next three are read. Each is released by
	// its own channel: a request read while the round's are answered waits
	// for the next round.
	for round := range n / 3 {
		var releases []chan struct{}
		for range 3 {
			releases = append(releases, <-bb.arrived)
		}
		require.Equal(t, int32(3), bb.now.Load(), "round %d", round)
		for _, r := range releases {
			close(r)
		}
	}
	for _, corr := range corrs {
		c.recv(req, corr)
	}
	require.Equal(t, int32(3), bb.most.Load())
}

// Close answers the requests already read, parked fetches included, then
// closes every connection and ends every goroutine.
func TestCloseDrains(t *testing.T) {
	leaktest.Check(t)
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	var clients []*testClient
	var fetches []int32
	req := fetchReq(12, "t", 0, 0, time.Minute)
	for range 4 {
		c := dial(t, s.Addr())
		c.do(metadataV9()) // connected and served
		clients = append(clients, c)
		fetches = append(fetches, c.send(req))
	}
	idle := dial(t, s.Addr())
	idle.do(metadataV9())
	// The fetches are read before Close: a metadata after each on the same
	// connection is answered only after the fetch, so send it and wait for
	// the server to have read it by watching the in-flight count.
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for c := range s.conns {
			n += int(c.inFlight.Load())
		}
		return n == 4
	})
	began := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(began), 30*time.Second)
	for i, c := range clients {
		resp := c.recv(req, fetches[i]).(*kmsg.FetchResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
		c.closed()
	}
	idle.closed()
	require.NoError(t, s.Close(), "Close twice")
	_, err = net.Dial("tcp", s.Addr())
	require.Error(t, err, "no longer listening")
}

// waitFor polls cond, for server state that no event announces (how many
// requests a connection has read, whether it is forgotten).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Many clients at once, producing and fetching: run with -race.
func TestConcurrentClients(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("t", 4))
	var wg sync.WaitGroup
	const clients, each = 8, 20
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, s.Addr())
			part := int32(i % 4)
			var corrs []int32
			var reqs []kmsg.Request
			for range each {
				r := produceReq(9, -1, "t", part, records("v"))
				corrs, reqs = append(corrs, c.send(r)), append(reqs, r)
				f := fetchReq(12, "t", part, 0, 0)
				f.MinBytes = 0
				corrs, reqs = append(corrs, c.send(f)), append(reqs, f)
			}
			for k := range corrs {
				c.recv(reqs[k], corrs[k])
			}
		}()
	}
	wg.Wait()
	total := int64(0)
	for i := range 4 {
		p, _ := b.Partition("t", i)
		total += p.EndOffset()
	}
	require.Equal(t, int64(clients*each), total)
}

// Produces pipelined on one connection to one partition append in the
// order they were sent.
func TestPipelinedProducesKeepOrder(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 2))
	c := dial(t, s.Addr())
	var corrs []int32
	var reqs []kmsg.Request
	for i := range 50 {
		r := produceReq(9, 1, "t", int32(i%2), records(string(rune('A'+i))))
		corrs, reqs = append(corrs, c.send(r)), append(reqs, r)
	}
	for k := range corrs {
		resp := c.recv(reqs[k], corrs[k]).(*kmsg.ProduceResponse)
		require.Equal(t, int64(k/2), resp.Topics[0].Partitions[0].BaseOffset)
	}
	for part := range 2 {
		p, _ := b.Partition("t", part)
		recs, err := p.Read(0, 1<<20)
		require.NoError(t, err)
		for i, r := range recs {
			require.Equal(t, string(rune('A'+2*i+part)), string(r.Value))
		}
	}
	require.Empty(t, s.connLanes(), "lanes are forgotten once done")
}

// A connection's requests are handled by goroutines it keeps: a client
// that sends one request at a time is served by two or three, taking turns
// at reading, not by a new goroutine per request, and no connection ever
// has more than MaxInFlight+1 (MaxInFlight handlers and the reader).
func TestWorkersReused(t *testing.T) {
	leaktest.Check(t)
	s, _, _ := start(t, Config{MaxInFlight: 64}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	workers := func() []int32 {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []int32
		for conn := range s.conns {
			out = append(out, conn.workers.Load())
		}
		return out
	}
	const n = 200
	for range n {
		c.do(metadataV9())
	}
	// One at a time: a new worker only when the last one had not yet
	// asked for the next request when it came (a thread descheduled on a
	// loaded machine); a few, never one a request (the bound leaves room
	// for a 2-core machine at load 20, where each deschedule adds one).
	w := workers()
	require.Len(t, w, 1)
	require.Positive(t, w[0])
	require.LessOrEqual(t, w[0], int32(n/10), "%d requests one at a time", n)
	t.Logf("%d requests one at a time: %d workers", n, w[0])
	// Pipelined: up to MaxInFlight handlers at once, and the reader.
	req := metadataV9()
	var corrs []int32
	for range n {
		corrs = append(corrs, c.send(req))
	}
	for _, corr := range corrs {
		c.recv(req, corr)
	}
	w = workers()
	require.Len(t, w, 1)
	require.LessOrEqual(t, w[0], int32(64+1))
	t.Logf("and %d pipelined: %d workers", n, w[0])
}

// Responses are written in request order whichever handler finishes
// first: a metadata request behind three parked fetches is handled at once
// but written last, and fetches released last to first are written first
// to last, each by the worker whose turn it is (no writer goroutine).
func TestResponsesInRequestOrder(t *testing.T) {
	leaktest.Check(t)
	broker := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	bb := &blockingBackend{Backend: broker, arrived: make(chan chan struct{}, 100), abort: make(chan struct{})}
	s, err := Listen("127.0.0.1:0", bb, Config{})
	require.NoError(t, err)
	defer s.Close()
	defer close(bb.abort) // a failed test must not hang in Close
	c := dial(t, s.Addr())
	fetch := fetchReq(12, "t", 0, 0, 0)
	fetch.MinBytes = 0
	var corrs []int32
	for range 3 {
		corrs = append(corrs, c.send(fetch))
	}
	meta := metadataV9()
	metaCorr := c.send(meta)
	var releases []chan struct{}
	for range 3 {
		releases = append(releases, <-bb.arrived)
	}
	conn := func() *conn {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			return c
		}
		return nil
	}()
	require.NotNil(t, conn)
	// The metadata is answered, not written: the fetches come first.
	waitFor(t, func() bool {
		conn.wmu.Lock()
		defer conn.wmu.Unlock()
		q := conn.order[conn.head:]
		return len(q) == 4 && q[3].ready
	})
	for i := len(releases) - 1; i >= 0; i-- {
		close(releases[i])
	}
	for _, corr := range corrs {
		c.recv(fetch, corr)
	}
	c.recv(meta, metaCorr)
	conn.wmu.Lock()
	defer conn.wmu.Unlock()
	require.Equal(t, conn.head, len(conn.order), "all written")
}

// BenchmarkTailRoundTrip is the server's part of a produce → consume round
// trip at the end of the log, one record at a time: a fetch parks at the
// end offset on one connection, a produce (acks=1, one record of 100 B) on
// another wakes it, and the round ends when both responses are read.
// Without a Kafka client's own work, it shows what a change to the
// connection's goroutines or the fetch path does to latency.
func BenchmarkTailRoundTrip(b *testing.B) {
	s, _ := benchServer(b)
	prod, cons := dial(b, s.Addr()), dial(b, s.Addr())
	recs := records(string(make([]byte, 100)))
	produce := prod.f.AppendRequest(nil, produceReq(9, 1, "t", 0, recs), 0)
	var lat []time.Duration
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		fetch := fetchReq(12, "t", 0, int64(i), 5*time.Second)
		cons.write(cons.f.AppendRequest(nil, fetch, 0))
		prod.write(produce)
		if _, err := prod.frame(); err != nil {
			b.Fatal(err)
		}
		if _, err := cons.frame(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cancelledProduce is a Backend whose acks=all produce gives up its wait
// for the ISR as a member's does when its request's ctx has ended.
type cancelledProduce struct{ Backend }

func (b cancelledProduce) Produce(ctx context.Context, _ log.TopicPartition, _ []byte, _ log.Acks) (int64, error) {
	if ctx.Err() == nil {
		return 0, fmt.Errorf("a call of the backend's own gave up: %w", context.Canceled)
	}
	return 0, fmt.Errorf("replica: produce not replicated: %w", ctx.Err())
}

// A produce given up because its server stopped reading (a member that
// stops answers what is parked) is NOT_LEADER_OR_FOLLOWER, which clients
// retry at the next leader, not UNKNOWN_SERVER_ERROR, which kgo fails its
// records with (interop's TestKgoClusterGroupETLKill failed so).
func TestProduceCancelledIsRetriable(t *testing.T) {
	broker := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", cancelledProduce{broker}, Config{})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, _, _ := s.produce(ctx, log.TopicPartition{Topic: "t"}, []byte{1}, log.AcksAll)
	require.Equal(t, errNotLeaderOrFollower, code)
	// A produce whose request goes on keeps the error's own code.
	code, _, _, _ = s.produce(context.Background(), log.TopicPartition{Topic: "t"}, []byte{1}, log.AcksAll)
	require.Equal(t, errUnknownServerError, code, "a ctx error of the backend's own")
}

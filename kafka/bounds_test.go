package kafka

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// dupFetch is a fetch of partition 0 of topic listed n times, asking for
// everything: MaxBytes and each partition's at 2^31−1.
func dupFetch(v int16, topic string, n int) *kmsg.FetchRequest {
	req := fetchReq(v, topic, 0, 0, 0)
	req.MinBytes, req.MaxBytes = 0, math.MaxInt32
	rt := &req.Topics[0]
	rt.Partitions[0].PartitionMaxBytes = math.MaxInt32
	for range n - 1 {
		rt.Partitions = append(rt.Partitions, rt.Partitions[0])
	}
	return req
}

// recordBytes is the record bytes of every partition of resp.
func recordBytes(resp *kmsg.FetchResponse) int {
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	return n
}

// TestFetchMergesDuplicates: a partition listed more than once is fetched
// once, from the offset of its last entry, in the place of its first, as
// Kafka's broker does.
func TestFetchMergesDuplicates(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("t", 2))
	for _, tp := range []log.TopicPartition{{Topic: "t"}, {Topic: "t"}, {Topic: "t", Partition: 1}} {
		_, err := b.Produce(t.Context(), tp, records(fmt.Sprint("p", tp.Partition, "-a"), "b"), log.AcksAll)
		require.NoError(t, err)
	}
	c := dial(t, s.Addr())
	for _, v := range []int16{4, 12, 13} {
		req := fetchReq(v, "t", 0, 0, 0)
		rt := &req.Topics[0]
		p1 := rt.Partitions[0]
		p1.Partition = 1
		again := rt.Partitions[0]
		again.FetchOffset = 2 // the second batch
		rt.Partitions = append(rt.Partitions, p1, again)
		resp := c.do(req).(*kmsg.FetchResponse)
		require.Len(t, resp.Topics, 1, "v%d", v)
		ps := resp.Topics[0].Partitions
		require.Len(t, ps, 2, "v%d: partition 0 once", v)
		require.Equal(t, int32(0), ps[0].Partition)
		require.Equal(t, []string{"p0-a", "b"}, values(t, ps[0].RecordBatches), "v%d: from the last entry's offset", v)
		require.Equal(t, int32(1), ps[1].Partition)
		require.Equal(t, []string{"p1-a", "b"}, values(t, ps[1].RecordBatches))
	}
}

// TestMergeDuplicates: the request as the server serves it, by name and by
// topic id, a topic listed in two runs keeping both.
func TestMergeDuplicates(t *testing.T) {
	part := func(p int32, offset int64) kmsg.FetchRequestTopicPartition {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset = p, offset
		return rp
	}
	topic := func(name string, parts ...kmsg.FetchRequestTopicPartition) kmsg.FetchRequestTopic {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID, rt.Partitions = name, topicID(name), parts
		return rt
	}
	for _, v := range []int16{12, 13} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.Topics = []kmsg.FetchRequestTopic{
			topic("a", part(0, 1), part(1, 1), part(0, 2)),
			topic("b", part(0, 1)),
			topic("a", part(1, 3), part(2, 1)),
		}
		mergeDuplicates(req)
		want := []kmsg.FetchRequestTopic{
			topic("a", part(0, 2), part(1, 3)),
			topic("b", part(0, 1)),
			topic("a", part(2, 1)),
		}
		require.Equal(t, want, req.Topics, "v%d", v)

		// Nothing listed twice: the request as it was.
		req.Topics = []kmsg.FetchRequestTopic{topic("a", part(0, 1)), topic("b", part(0, 1))}
		before := req.Topics
		mergeDuplicates(req)
		require.Equal(t, &before[0], &req.Topics[0], "not rebuilt")
	}
	// Many partitions (the map path) and one repeated far apart.
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	var ps []kmsg.FetchRequestTopicPartition
	for p := range int32(40) {
		ps = append(ps, part(p, 0))
	}
	ps = append(ps, part(3, 9))
	req.Topics = []kmsg.FetchRequestTopic{topic("a", ps...)}
	mergeDuplicates(req)
	require.Len(t, req.Topics[0].Partitions, 40)
	require.Equal(t, int64(9), req.Topics[0].Partitions[3].FetchOffset)
}

// TestFetchMaxBytes: Config.FetchMaxBytes bounds a response whatever the
// request's MaxBytes, and each partition gets its own max bytes (not the
// largest of the request's).
func TestFetchMaxBytes(t *testing.T) {
	leaktest.Check(t)
	const cap = 64 << 10
	s, b := startOnDisk(t, Config{FetchMaxBytes: cap}, logtest.Topic("t", 3))
	value := strings.Repeat("x", 10<<10)
	for p := range 3 {
		for range 5 { // 50 KiB a partition, 150 KiB in all
			_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t", Partition: p}, records(value), log.AcksAll)
			require.NoError(t, err)
		}
	}
	c := dial(t, s.Addr())
	req := multiFetch(12, "t", 3, math.MaxInt32)
	resp := c.do(req).(*kmsg.FetchResponse)
	n := recordBytes(resp)
	require.LessOrEqual(t, n, cap, "the broker's cap, not the request's MaxBytes")
	require.Greater(t, n, cap/2)

	// Partition 0 may take 1 byte (so one batch: the first partition with
	// records), partition 1 everything it has.
	req = multiFetch(12, "t", 2, math.MaxInt32)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1
	resp = c.do(req).(*kmsg.FetchResponse)
	p0, p1 := resp.Topics[0].Partitions[0].RecordBatches, resp.Topics[0].Partitions[1].RecordBatches
	require.Len(t, values(t, p0), 1, "one batch for 1 byte")
	require.Len(t, values(t, p1), 5, "all of partition 1's 50 KiB")
}

// fetchChildEnv runs TestFetchDuplicatesTLSChild as the child of
// TestFetchDuplicatesTLSMemory.
const fetchChildEnv = "STRATA_FETCH_CHILD"

// TestFetchDuplicatesTLSMemory reproduces issue 25's fetch: over TLS, two
// pipelined fetches each listing one partition of 21 MB 100 times with
// MaxBytes 2^31−1 made the server build 2.1 GB responses in memory, and
// run out of it. A child process serves them, its address space limited
// to 1 GiB more than it had at start; it must answer both (one partition
// each, within fetch.max.bytes) and peak well under the old figure.
func TestFetchDuplicatesTLSMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 21 MB and runs a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFetchDuplicatesTLSChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fetchChildEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	require.NoError(t, err, "child:\n%s", out.String())
	require.Contains(t, out.String(), "served both fetches")
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	t.Logf("child peak RSS %d MiB (before the fix: over 4 GiB, or killed)", peak>>20)
	require.Less(t, peak, int64(1<<30), "the child's peak RSS")
}

// TestFetchDuplicatesTLSChild is TestFetchDuplicatesTLSMemory's child: it
// does nothing unless run as one.
func TestFetchDuplicatesTLSChild(t *testing.T) {
	if os.Getenv(fetchChildEnv) != "1" {
		return
	}
	limitAddressSpace(t, 1<<30)
	srvTLS, cliTLS := selfSigned(t)
	s, b := startOnDisk(t, Config{TLS: srvTLS}, logtest.Topic("t", 1))
	s.sendfileMin = defaultSendfileMin
	value := strings.Repeat("v", 1_000_000)
	for range 21 {
		_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records(value), log.AcksAll)
		require.NoError(t, err)
	}
	nc, err := tls.Dial("tcp", s.Addr(), cliTLS)
	require.NoError(t, err)
	defer nc.Close()
	c := &testClient{t: t, nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
	req := dupFetch(12, "t", 100)
	first, second := c.send(req), c.send(req) // pipelined
	for _, corr := range []int32{first, second} {
		resp := c.recv(req, corr).(*kmsg.FetchResponse)
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1, "the partition once")
		n := recordBytes(resp)
		require.Greater(t, n, 20_000_000, "all 21 MB")
		require.LessOrEqual(t, n, defaultFetchMaxBytes)
	}
	fmt.Println("served both fetches")
}

// limitAddressSpace limits the process's address space to extra bytes
// more than it has now. Not under the race detector, whose shadow memory
// takes terabytes of addresses: the parent's RSS check still holds there.
func limitAddressSpace(t *testing.T, extra uint64) {
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	var vmSize uint64
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			vmSize = kb << 10
		}
	}
	require.NotZero(t, vmSize)
	if vmSize > 64<<30 {
		t.Logf("address space not limited: %d GiB mapped (race detector)", vmSize>>30)
		return
	}
	lim := unix.Rlimit{Cur: vmSize + extra, Max: vmSize + extra}
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_AS, &lim))
}

// TestConnCopyBudget: small partitions are copied into a response only
// within connCopyBytes per connection; past it they go as handles, the
// bytes the same.
func TestConnCopyBudget(t *testing.T) {
	leaktest.Check(t)
	s, b := startOnDisk(t, Config{}, logtest.Topic("t", 1))
	s.sendfileMin = math.MaxInt64 // every partition copied if it may be
	_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records("a", "b"), log.AcksAll)
	require.NoError(t, err)
	c := dial(t, s.Addr())
	fr := c.do(fetchReq(12, "t", 0, 0, 0)).(*kmsg.FetchResponse)
	require.Equal(t, []string{"a", "b"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))
	require.Zero(t, s.sentFiles.Load(), "copied")

	var cn *conn
	s.mu.Lock()
	for k := range s.conns {
		cn = k
	}
	s.mu.Unlock()
	// The writer gives the bytes back once its write returned, which may
	// be just after the client read them.
	require.Eventually(t, func() bool { return cn.copied.Load() == 0 }, 10*time.Second, time.Millisecond,
		"given back once written: %d left", cn.copied.Load())
	cn.copied.Store(connCopyBytes) // as if responses not yet written held it all
	fr = c.do(fetchReq(12, "t", 0, 0, 0)).(*kmsg.FetchResponse)
	require.Equal(t, []string{"a", "b"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))
	require.Equal(t, int64(1), s.sentFiles.Load(), "over the budget: the handle")
	require.Equal(t, int64(connCopyBytes), cn.copied.Load())
	cn.copied.Store(0)
}

// TestMaxConnectionsPerIP: past the limit a new connection from the same
// address is closed at once, those already open and those from other
// addresses are served; an override sets one address's limit.
func TestMaxConnectionsPerIP(t *testing.T) {
	leaktest.Check(t)
	s, _, logs := start(t, Config{MaxConnectionsPerIP: 2, MaxConnectionsPerIPOverrides: map[string]int{"127.0.0.3": 0}})
	served := func(c *testClient) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		require.Equal(t, errNone, c.do(req).(*kmsg.ApiVersionsResponse).ErrorCode)
	}
	a, b := dial(t, s.Addr()), dial(t, s.Addr())
	served(a)
	served(b)
	over := dial(t, s.Addr())
	over.closed()
	require.Contains(t, logs.String(), "too many connections from one address")
	served(a)

	other := dialFrom(t, "127.0.0.2", s.Addr())
	served(other)
	blocked := dialFrom(t, "127.0.0.3", s.Addr())
	blocked.closed()

	// Once one closes, 127.0.0.1 may connect again.
	b.nc.Close()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.perIP["127.0.0.1"] == 1
	}, 10*time.Second, time.Millisecond)
	served(dial(t, s.Addr()))
}

// dialFrom dials addr from the local address ip (any of 127/8 is
// loopback on Linux).
func dialFrom(t *testing.T, ip, addr string) *testClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))}
}

// TestConnLimitsDefaultsHold: the default per-address limit bounds the
// connections one address can hold, well below MaxConnections.
func TestConnLimitsDefaults(t *testing.T) {
	cfg := Config{}.withDefaults()
	require.Equal(t, 1000, cfg.MaxConnectionsPerIP)
	require.Less(t, cfg.MaxConnectionsPerIP, cfg.MaxConnections)
	require.Equal(t, 30*time.Second, cfg.RequestTimeout)
	require.Equal(t, 100*time.Millisecond, cfg.FailedAuthenticationDelay)
	require.Equal(t, 57671680, cfg.FetchMaxBytes)
	require.Equal(t, time.Duration(0), Config{FailedAuthenticationDelay: -1}.withDefaults().FailedAuthenticationDelay)
	require.Equal(t, map[string]int{"::1": 3}, Config{MaxConnectionsPerIPOverrides: map[string]int{"0::1": 3}}.withDefaults().MaxConnectionsPerIPOverrides)
	for _, bad := range []Config{
		{MaxConnectionsPerIPOverrides: map[string]int{"localhost": 1}},
		{MaxConnectionsPerIPOverrides: map[string]int{"10.0.0.1": -1}},
		{RequestTimeout: -1},
		{AuthenticationTimeout: -1},
		{FetchMaxBytes: -1},
	} {
		_, err := Listen("127.0.0.1:0", nil, bad)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
	}
}

// TestSlowSenderClosed: a request begun and not finished within
// RequestTimeout closes its connection, and so does a connection that
// sends nothing; one that sent a request and idles is not closed then.
func TestSlowSenderClosed(t *testing.T) {
	leaktest.Check(t)
	s, _, logs := start(t, Config{RequestTimeout: 300 * time.Millisecond})
	idle := dial(t, s.Addr())
	require.Equal(t, errNone, idle.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)

	slow := dial(t, s.Addr())
	frame := slow.f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	slow.write(frame[:6]) // the size and part of the header, then nothing
	began := time.Now()
	slow.closed()
	require.GreaterOrEqual(t, time.Since(began), 250*time.Millisecond)
	require.Contains(t, logs.String(), "request not received whole in time")

	silent := dial(t, s.Addr())
	silent.closed()
	require.Contains(t, logs.String(), "no request in time")

	// idle sent its request before silent connected, and is still served.
	require.Equal(t, errNone, idle.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
}

// TestAuthenticationTimeout: a connection that must authenticate and does
// not within AuthenticationTimeout is closed, requests or not.
func TestAuthenticationTimeout(t *testing.T) {
	leaktest.Check(t)
	s, _, logs := start(t, Config{SASL: saslConfig(t), AuthenticationTimeout: 300 * time.Millisecond})
	c := dial(t, s.Addr())
	require.Equal(t, errNone, c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
	require.Equal(t, errNone, handshake(c, 1, "PLAIN").ErrorCode)
	c.closed()
	require.Contains(t, logs.String(), "not authenticated in time")
}

// TestFailedAuthenticationDelayed: a failed authentication is answered,
// and its connection closed, FailedAuthenticationDelay later; meanwhile
// other connections are served.
func TestFailedAuthenticationDelayed(t *testing.T) {
	leaktest.Check(t)
	const delay = 400 * time.Millisecond
	s, _, _ := start(t, Config{SASL: saslConfig(t), FailedAuthenticationDelay: delay})
	c, other := dial(t, s.Addr()), dial(t, s.Addr())
	require.Equal(t, errNone, handshake(c, 1, "PLAIN").ErrorCode)
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(1)
	req.SASLAuthBytes = []byte("\x00alice\x00wrong")
	began := time.Now()
	corr := c.send(req)
	// Another connection is served during the delay.
	require.Equal(t, errNone, other.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
	require.Equal(t, errNone, handshake(other, 1, "PLAIN").ErrorCode)
	require.Equal(t, errNone, authenticate(other, 1, []byte("\x00alice\x00s3cret")).ErrorCode)
	resp := c.recv(req, corr).(*kmsg.SASLAuthenticateResponse)
	took := time.Since(began)
	require.Equal(t, errSaslAuthenticationFailed, resp.ErrorCode)
	require.GreaterOrEqual(t, took, delay)
	require.Less(t, took, 20*time.Second)
	c.closed()

	// Raw tokens (SaslHandshake v0): closed without an answer, as late.
	c = dial(t, s.Addr())
	require.Equal(t, errNone, handshake(c, 0, "PLAIN").ErrorCode)
	began = time.Now()
	c.write(sized([]byte("\x00alice\x00wrong")))
	c.closed()
	require.GreaterOrEqual(t, time.Since(began), delay)

	// Close does not wait out a delay.
	s2, _, _ := start(t, Config{SASL: saslConfig(t), FailedAuthenticationDelay: time.Hour})
	c = dial(t, s2.Addr())
	require.Equal(t, errNone, handshake(c, 1, "PLAIN").ErrorCode)
	c.send(req)
	require.Eventually(t, func() bool { return s2.authDelayed.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, s2.Close())
	require.Zero(t, s2.authDelayed.Load())
}

// TestEmptyPasswordRefused: a user whose password is empty never
// authenticates with PLAIN, even with an empty password, and a SCRAM
// credential cannot be made of one.
func TestEmptyPasswordRefused(t *testing.T) {
	p := &plainServer{lookup: func(u string) (string, bool) { return "", u == "nopass" }}
	_, _, err := p.step([]byte("\x00nopass\x00"))
	require.ErrorIs(t, err, errAuthFailed)
	_, err = NewSCRAMCredential(mechSCRAM256, "", 0)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestIdleConnectionsLockout reproduces issue 25's lockout with the
// default limits: an address holding idle connections up to its limit
// (1000) gets no more, and clients from other addresses are served.
func TestIdleConnectionsLockout(t *testing.T) {
	leaktest.Check(t)
	s, _, _ := start(t, Config{})
	limit := s.cfg.MaxConnectionsPerIP
	for range limit {
		nc, err := net.Dial("tcp", s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
	}
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.perIP["127.0.0.1"] == limit
	}, 30*time.Second, time.Millisecond, "all %d accepted", limit)
	dial(t, s.Addr()).closed()
	other := dialFrom(t, "127.0.0.2", s.Addr())
	require.Equal(t, errNone, other.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
}

// TestRequestBytesInFlight: a connection's requests not yet answered hold
// at most MaxRequestBytes: past it the reader waits for answers before it
// reads the next request, and then goes on.
func TestRequestBytesInFlight(t *testing.T) {
	leaktest.Check(t)
	const limit = 8 << 10
	s, b, _ := start(t, Config{MaxRequestBytes: limit}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	c.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(strings.Repeat("c", 5<<10)))
	parked := fetchReq(12, "t", 0, 0, 30*time.Second) // waits for a record
	first := c.send(parked)
	av := kmsg.NewPtrApiVersionsRequest()
	second := c.send(av) // 5 KiB more: over the limit while the fetch waits
	var cn *conn
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for k := range s.conns {
			cn = k
		}
		// The fetch's bytes are held as its frame is read, and it is in
		// flight a moment later, once dispatched.
		return cn != nil && cn.reqHeld.Load() > 5<<10 && cn.inFlight.Load() >= 1
	}, 10*time.Second, time.Millisecond)
	require.LessOrEqual(t, cn.reqHeld.Load(), int64(limit), "the second request is not read yet")
	require.Equal(t, int32(1), cn.inFlight.Load(), "only the fetch is in flight")

	_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records("wake"), log.AcksAll)
	require.NoError(t, err)
	fr := c.recv(parked, first).(*kmsg.FetchResponse)
	require.Equal(t, []string{"wake"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))
	require.Equal(t, errNone, c.recv(av, second).(*kmsg.ApiVersionsResponse).ErrorCode)
	require.Eventually(t, func() bool { return cn.reqHeld.Load() == 0 }, 10*time.Second, time.Millisecond)
}

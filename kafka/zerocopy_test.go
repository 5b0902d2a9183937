package kafka

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"net"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startOnDisk serves a broker on the operating system's files (which
// sendfile can send), every partition's records with sendfile.
func startOnDisk(t *testing.T, cfg Config, opts ...logtest.Option) (*Server, *log.Broker) {
	t.Helper()
	b := logtest.New(t, opts...)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Listen("127.0.0.1:0", b, cfg)
	require.NoError(t, err)
	s.sendfileMin = 0
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, b
}

// rawResponse reads the response frame to corr as it came, without the
// correlation id and header tags.
func rawResponse(t *testing.T, c *testClient, req kmsg.Request, corr int32) []byte {
	t.Helper()
	b, err := c.frame()
	require.NoError(t, err)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(b)))
	b = b[4:]
	if req.IsFlexible() {
		require.Equal(t, byte(0), b[0])
		b = b[1:]
	}
	return b
}

func multiFetch(v int16, topic string, partitions int, maxBytes int32) *kmsg.FetchRequest {
	req := fetchReq(v, topic, 0, 0, time.Millisecond)
	req.MaxBytes = maxBytes
	req.Topics[0].Partitions[0].PartitionMaxBytes = maxBytes
	for p := 1; p < partitions; p++ {
		rp := req.Topics[0].Partitions[0]
		rp.Partition = int32(p)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	return req
}

// TestFetchSendfileBytesOnWire: a fetch response whose records went with
// sendfile, framing around them written apart, is byte for byte kmsg's
// encoding of the same response with the records inline, at every version
// (flexible ones and topic ids included), and its records are the
// partition's bytes.
func TestFetchSendfileBytesOnWire(t *testing.T) {
	leaktest.Check(t)
	s, b := startOnDisk(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 3, SegmentBytes: 1 << 10}))
	// Partition 0 spans segments, 1 has one batch, 2 is empty.
	for i := range 40 {
		_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records(string(bytes.Repeat([]byte{byte('a' + i%26)}, 100))), log.AcksAll)
		require.NoError(t, err)
	}
	_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t", Partition: 1}, records("one", "two"), log.AcksAll)
	require.NoError(t, err)
	p0, err := b.Partition("t", 0)
	require.NoError(t, err)
	require.Greater(t, p0.Segments(), 2)
	want := make([][]byte, 3)
	for p := range 3 {
		part, err := b.Partition("t", p)
		require.NoError(t, err)
		h, err := part.Slice(0, 1<<20, part.HighWatermark())
		require.NoError(t, err)
		want[p], err = h.Bytes()
		h.Release()
		require.NoError(t, err)
	}

	c := dial(t, s.Addr())
	for v := int16(4); v <= 16; v++ {
		sent := s.sentFiles.Load()
		req := multiFetch(v, "t", 3, 1<<20)
		raw := rawResponse(t, c, req, c.send(req))
		require.Equal(t, sent+2, s.sentFiles.Load(), "v%d: two partitions sent with sendfile", v)
		resp := req.ResponseKind()
		require.NoError(t, resp.ReadFrom(raw), "v%d", v)
		fr := resp.(*kmsg.FetchResponse)
		for p := range 3 {
			got := fr.Topics[0].Partitions[p]
			require.Equal(t, errNone, got.ErrorCode)
			require.True(t, bytes.Equal(want[p], got.RecordBatches), "v%d partition %d", v, p)
		}
		resp.SetVersion(v)
		require.Equal(t, resp.AppendTo(nil), raw, "v%d: the bytes kmsg encodes", v)
	}
}

// TestFetchSendfileOutlivesDeletion: the segments of a fetch response
// being sent are deleted (the topic is) while the client is slow to read:
// the response still comes whole, from the files the handle keeps open.
func TestFetchSendfileOutlivesDeletion(t *testing.T) {
	leaktest.Check(t)
	s, b := startOnDisk(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1, SegmentBytes: 4 << 20}))
	part, err := b.Partition("t", 0)
	require.NoError(t, err)
	value := bytes.Repeat([]byte("x"), 1000)
	for range 32 {
		vals := make([]string, 1000)
		for i := range vals {
			vals[i] = string(value)
		}
		_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records(vals...), log.AcksAll)
		require.NoError(t, err)
	}
	require.Greater(t, part.Segments(), 4)
	h, err := part.Slice(0, 64<<20, part.HighWatermark())
	require.NoError(t, err)
	want, err := h.Bytes()
	h.Release()
	require.NoError(t, err)
	require.Greater(t, len(want), 30<<20)

	nc, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(16<<10))
	c := &testClient{t: t, nc: nc, r: bufio.NewReaderSize(nc, 16<<10), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))}
	req := multiFetch(12, "t", 1, 64<<20)
	corr := c.send(req)
	// Read the start only: the server is still sending (30 MiB do not fit
	// in the sockets' buffers) when the topic goes.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	head := make([]byte, 64<<10)
	_, err = io.ReadFull(c.r, head)
	require.NoError(t, err)
	require.Zero(t, s.sentFiles.Load(), "still sending")
	require.NoError(t, b.DeleteTopic("t"))
	rest, err := io.ReadAll(io.LimitReader(c.r, int64(binary.BigEndian.Uint32(head))+4-int64(len(head))))
	require.NoError(t, err)
	frame := append(head, rest...)[4:]
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)))
	resp := req.ResponseKind()
	require.NoError(t, resp.ReadFrom(frame[5:]))
	got := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	require.Equal(t, errNone, got.ErrorCode)
	require.True(t, bytes.Equal(want, got.RecordBatches), "the records as they were")
	require.Equal(t, int64(1), s.sentFiles.Load())
}

// TestFetchTLSCopies: under TLS the records are copied from the segment
// files by the writer, in chunks (sendfile cannot write to a TLS
// connection), and arrive the same.
func TestFetchTLSCopies(t *testing.T) {
	leaktest.Check(t)
	srvTLS, cliTLS := selfSigned(t)
	s, b := startOnDisk(t, Config{TLS: srvTLS}, logtest.Topic("t", 1))
	_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records("over", "tls"), log.AcksAll)
	require.NoError(t, err)
	nc, err := tls.Dial("tcp", s.Addr(), cliTLS)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	c := &testClient{t: t, nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
	fr := c.do(fetchReq(12, "t", 0, 0, time.Second)).(*kmsg.FetchResponse)
	require.Equal(t, []string{"over", "tls"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))
	require.Equal(t, int64(1), s.sentFiles.Load(), "written from the handle")
}

// TestFetchCopyForced: with copying forced (the benchmarks' baseline) the
// bytes are the same and no sendfile happens.
func TestFetchCopyForced(t *testing.T) {
	s, b := startOnDisk(t, Config{}, logtest.Topic("t", 1))
	s.sendfileMin = math.MaxInt64
	_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records("a", "b"), log.AcksAll)
	require.NoError(t, err)
	c := dial(t, s.Addr())
	fr := c.do(fetchReq(12, "t", 0, 0, time.Second)).(*kmsg.FetchResponse)
	require.Equal(t, []string{"a", "b"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))
	require.Zero(t, s.sentFiles.Load())
}

// TestFetchHandlesReleased: the handles of responses that a client never
// reads — it sent several fetches and went away — are released all the
// same, and so are those of responses written.
func TestFetchHandlesReleased(t *testing.T) {
	leaktest.Check(t)
	s, b := startOnDisk(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 2}))
	value := string(bytes.Repeat([]byte("x"), 1000))
	for p := range 2 {
		vals := make([]string, 1000)
		for i := range vals {
			vals[i] = value
		}
		_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t", Partition: p}, records(vals...), log.AcksAll)
		require.NoError(t, err)
	}
	c := dial(t, s.Addr())
	req := multiFetch(12, "t", 2, 4<<20)
	c.do(req)
	require.Equal(t, int64(2), s.sentFiles.Load())
	require.Zero(t, s.heldFiles.Load())

	gone := dial(t, s.Addr())
	for range 10 {
		gone.send(req)
	}
	require.NoError(t, gone.nc.(*net.TCPConn).SetLinger(0))
	gone.nc.Close() // a reset: the writer's writes fail
	conns := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	}
	// Once the server forgets the connection its writer has gone through
	// every response.
	require.Eventually(t, func() bool { return conns() == 1 && s.heldFiles.Load() == 0 }, 5*time.Second, time.Millisecond)
}

// TestFetchSendfileOutlivesRetention: retention deletes the oldest
// segments — those of a fetch response being sent to a slow client — as
// more records arrive: the response still comes whole.
func TestFetchSendfileOutlivesRetention(t *testing.T) {
	leaktest.Check(t)
	s, b := startOnDisk(t, Config{},
		logtest.WithConfig(log.Config{RetentionCheckInterval: 5 * time.Millisecond}),
		logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1, SegmentBytes: 4 << 20, RetentionBytes: 40 << 20}))
	part, err := b.Partition("t", 0)
	require.NoError(t, err)
	vals := make([]string, 1000)
	for i := range vals {
		vals[i] = string(bytes.Repeat([]byte("x"), 1000))
	}
	batch := records(vals...)
	produce := func(n int) {
		for range n {
			_, err := b.Produce(t.Context(), log.TopicPartition{Topic: "t"}, batch, log.AcksAll)
			require.NoError(t, err)
		}
	}
	produce(32) // 32 MB: under the retention limit
	h, err := part.Slice(0, 64<<20, part.HighWatermark())
	require.NoError(t, err)
	want, err := h.Bytes()
	h.Release()
	require.NoError(t, err)

	nc, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(16<<10))
	c := &testClient{t: t, nc: nc, r: bufio.NewReaderSize(nc, 16<<10), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))}
	req := multiFetch(12, "t", 1, 64<<20)
	corr := c.send(req)
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	head := make([]byte, 64<<10)
	_, err = io.ReadFull(c.r, head)
	require.NoError(t, err)
	require.Zero(t, s.sentFiles.Load(), "still sending")
	produce(16) // over the limit: the oldest segments go
	require.Eventually(t, func() bool { return part.StartOffset() > 0 }, 10*time.Second, time.Millisecond)
	rest, err := io.ReadAll(io.LimitReader(c.r, int64(binary.BigEndian.Uint32(head))+4-int64(len(head))))
	require.NoError(t, err)
	frame := append(head, rest...)[4:]
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)))
	resp := req.ResponseKind()
	require.NoError(t, resp.ReadFrom(frame[5:]))
	got := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	require.Equal(t, errNone, got.ErrorCode)
	require.True(t, bytes.Equal(want, got.RecordBatches), "the records as they were")
	require.Equal(t, int64(1), s.sentFiles.Load()) // counted before the response's last bytes go
	require.Eventually(t, func() bool { return s.heldFiles.Load() == 0 }, 5*time.Second, time.Millisecond, "released once written")
}

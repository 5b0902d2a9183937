package log

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

// Until partitions keep a high watermark of their own, HighWatermark is the
// end offset. These tests put it behind the end offset through the fetch's
// seam (Broker.fetch's hw), and call the partition's appended hook when they
// move it, as the owner of the high watermark does.

// fakeHW is a high watermark the test moves.
type fakeHW struct{ v atomic.Int64 }

func (h *fakeHW) get(*Partition) int64 { return h.v.Load() }

// TestFetchBoundedByIsolation: a consumer's fetch returns no batch at or past
// the high watermark, a replica's reads to the end offset; both answer the
// high watermark, last stable offset and log start offset.
func TestFetchBoundedByIsolation(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b, _ := boundedPartition(t, fs, dir) // offsets 0-29, batches of 3, two segments
		hw := &fakeHW{}
		hw.v.Store(16)
		ctx := context.Background()
		for _, tc := range []struct {
			name string
			req  FetchRequest
			want []int64
		}{
			{"consumer", FetchRequest{}, wantBases(4, 16)},
			{"read_committed", FetchRequest{Isolation: FetchTxnCommitted}, wantBases(4, 16)},
			{"log end", FetchRequest{Isolation: FetchLogEnd}, wantBases(4, 30)},
			{"replica", FetchRequest{ReplicaID: 2}, wantBases(4, 30)},
		} {
			req := tc.req
			req.Partitions = []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 4}}
			resp, err := b.fetch(ctx, req, hw.get)
			require.NoError(t, err, tc.name)
			fp := &resp.Partitions[0]
			require.EqualValues(t, 16, fp.HighWatermark, tc.name)
			require.EqualValues(t, 16, fp.LastStableOffset, tc.name)
			require.Zero(t, fp.LogStartOffset, tc.name)
			require.Equal(t, tc.want, batchBases(t, fetchedBytes(t, fp)), tc.name)
		}
	})
}

// TestFetchInvalidRequest: what no broker could serve is refused with
// ErrInvalidRequest, and nothing waits.
func TestFetchInvalidRequest(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	createT(t, b, "t", TopicConfig{})
	parts := []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}}}
	for _, req := range []FetchRequest{
		{Partitions: parts, Isolation: 3, MaxWait: time.Hour},
		{Partitions: parts, Isolation: -1, MaxWait: time.Hour},
		{Partitions: parts, ReplicaID: -1, MaxWait: time.Hour},
	} {
		_, err := b.Fetch(context.Background(), req)
		require.ErrorIs(t, err, ErrInvalidRequest, "%+v", req)
	}
	require.Zero(t, b.fetches.Pending())
}

// TestFetchParkedUntilHighWatermark: a consumer's fetch parked below the high
// watermark is not completed by appends past it, only when the high
// watermark moves; and it waits for MinBytes readable below it. A replica's
// fetch is completed by the append.
func TestFetchParkedUntilHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openT(t, vfs.NewMem(), "/d")
		defer b.Close()
		p := createT(t, b, "t", TopicConfig{})
		for i := range 2 { // offsets 0-5: below the high watermark
			_, err := p.Append(rec(3*i), rec(3*i+1), rec(3*i+2))
			require.NoError(t, err)
		}
		hw := &fakeHW{}
		hw.v.Store(6)
		raw, err := p.ReadBatches(0, 1<<20, 3)
		require.NoError(t, err)
		batchBytes := len(raw)

		fetch := func(req FetchRequest) <-chan FetchResponse {
			req.Partitions = []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 6}}
			req.MaxWait = time.Hour
			got := make(chan FetchResponse, 1)
			go func() {
				resp, err := b.fetch(context.Background(), req, hw.get)
				if err != nil {
					t.Error(err)
				}
				got <- resp
			}()
			return got
		}
		pending := func(got <-chan FetchResponse) bool {
			synctest.Wait()
			select {
			case resp := <-got:
				resp.Release()
				return false
			default:
				return true
			}
		}
		one := fetch(FetchRequest{})                         // MinBytes 1
		two := fetch(FetchRequest{MinBytes: 2 * batchBytes}) // two batches
		replica := fetch(FetchRequest{ReplicaID: 2})         // to the end offset
		synctest.Wait()
		require.Equal(t, 3, b.fetches.Pending())

		// Three batches appended past the high watermark: only the
		// replica's fetch completes.
		for i := 2; i < 5; i++ {
			_, err := p.Append(rec(3*i), rec(3*i+1), rec(3*i+2))
			require.NoError(t, err)
		}
		synctest.Wait()
		resp := <-replica
		// The first append completes it: it may have read on before the
		// other two landed, never past the end.
		gotBases := batchBases(t, fetchedBytes(t, &resp.Partitions[0]))
		require.NotEmpty(t, gotBases)
		require.LessOrEqual(t, len(gotBases), 3)
		require.Equal(t, wantBases(6, 15)[:len(gotBases)], gotBases)
		require.True(t, pending(one))
		require.True(t, pending(two))

		// The high watermark moves by one batch: enough for MinBytes 1,
		// not for two batches.
		start := time.Now()
		hw.v.Store(9)
		b.appended(p)
		resp = <-one
		require.Zero(t, time.Since(start), "completed by the move, not by a timer")
		require.EqualValues(t, 9, resp.Partitions[0].HighWatermark)
		require.Equal(t, []int64{6}, batchBases(t, fetchedBytes(t, &resp.Partitions[0])))
		require.True(t, pending(two))

		// A move that changes nothing readable wakes nothing either.
		b.appended(p)
		require.True(t, pending(two))

		hw.v.Store(12)
		b.appended(p)
		resp = <-two
		require.Zero(t, time.Since(start))
		require.Equal(t, []int64{6, 9}, batchBases(t, fetchedBytes(t, &resp.Partitions[0])))
		require.Zero(t, b.fetches.Pending())
	})
}

// TestFetchParkedOffsetGone: a parked fetch whose offset leaves the log
// (retention moves the log start past it) answers at once, with the error.
func TestFetchParkedOffsetGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openT(t, vfs.NewMem(), "/d")
		defer b.Close()
		p := createT(t, b, "t", TopicConfig{RetentionTime: time.Hour})
		_, err := p.Append(rec(0))
		require.NoError(t, err)
		hw := &fakeHW{}
		hw.v.Store(1)
		got := make(chan FetchResponse, 1)
		go func() {
			resp, err := b.fetch(context.Background(), FetchRequest{
				Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 0}},
				MinBytes:   1 << 20, MaxWait: time.Hour,
			}, hw.get)
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		synctest.Wait()
		require.Equal(t, 1, b.fetches.Pending())
		require.NoError(t, p.Roll())
		_, err = p.Append(rec(1))
		require.NoError(t, err)
		_, err = p.enforceRetention(time.Now().Add(2 * time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, p.StartOffset())
		hw.v.Store(2)
		b.appended(p)
		resp := <-got
		require.ErrorIs(t, resp.Partitions[0].Err, ErrOffsetOutOfRange)
	})
}

// TestBatchesHandle: a handle spanning segments writes the same bytes with
// sendfile (TCP), with a copy (net.Pipe, a bytes.Buffer) and as Bytes; it
// keeps its segments open after retention deleted them, until Release.
func TestBatchesHandle(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		_, p := boundedPartition(t, fs, dir)
		want, err := p.ReadBatches(6, 1<<20, 30)
		require.NoError(t, err)
		require.Equal(t, wantBases(6, 30), batchBases(t, want))

		h, err := p.Slice(6, 1<<20, 30)
		require.NoError(t, err)
		require.Equal(t, 2, h.NumRanges(), "spans both segments")
		require.EqualValues(t, len(want), h.Len())
		var sum int64
		for i := range h.NumRanges() {
			f, pos, n := h.FileRange(i)
			require.NotNil(t, f)
			require.GreaterOrEqual(t, pos, int64(0))
			sum += n
		}
		require.Equal(t, h.Len(), sum)

		// Retention deletes the first segment: the handle still reads it.
		p.editConfig(func(c *TopicConfig) { c.RetentionTime = time.Hour })
		n, err := p.enforceRetention(time.Now().Add(2 * time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		first, _, _ := h.FileRange(0)

		var buf bytes.Buffer
		n64, err := h.WriteTo(&buf)
		require.NoError(t, err)
		require.EqualValues(t, len(want), n64)
		require.Equal(t, want, buf.Bytes())
		raw, err := h.Bytes()
		require.NoError(t, err)
		require.Equal(t, want, raw)
		require.Equal(t, want, writeThrough(t, tcpPair, &h))
		require.Equal(t, want, writeThrough(t, net.Pipe, &h))

		h.Release()
		h.Release() // again: nothing
		_, err = h.Bytes()
		require.ErrorIs(t, err, ErrReleased)
		_, err = h.WriteTo(io.Discard)
		require.ErrorIs(t, err, ErrReleased)
		_, err = first.ReadAt(make([]byte, 1), 0)
		require.Error(t, err, "the deleted segment's file is closed by the last Release")
		require.Equal(t, raw, want, "Bytes' slice outlives Release")
	})
}

// TestBatchesOf: batches in memory are returned and written as they are.
func TestBatchesOf(t *testing.T) {
	raw := encodeBatch(3)
	h := BatchesOf(raw)
	require.Zero(t, h.NumRanges())
	require.EqualValues(t, len(raw), h.Len())
	got, err := h.Bytes()
	require.NoError(t, err)
	require.Same(t, &raw[0], &got[0], "no copy")
	var buf bytes.Buffer
	_, err = h.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, raw, buf.Bytes())
	h.Release()
	_, err = h.Bytes()
	require.ErrorIs(t, err, ErrReleased)

	var zero Batches
	require.Zero(t, zero.Len())
	got, err = zero.Bytes()
	require.NoError(t, err)
	require.Empty(t, got)
	zero.Release()
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair() (net.Conn, net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		panic(err)
	}
	s, err := l.Accept()
	if err != nil {
		panic(err)
	}
	return c, s
}

// writeThrough writes h to one end of a connection and returns what the
// other end read.
func writeThrough(t *testing.T, pair func() (net.Conn, net.Conn), h *Batches) []byte {
	t.Helper()
	a, c := pair()
	defer c.Close()
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(c)
		got <- b
	}()
	n, err := h.WriteTo(a)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	out := <-got
	require.EqualValues(t, len(out), n)
	return out
}

// TestFetchAnswersErrorsAtOnce: when one partition of a fetch fails (here
// its offset is out of range), the fetch answers at once, as Kafka's does,
// rather than wait MaxWait on the others.
func TestFetchAnswersErrorsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openT(t, vfs.NewMem(), "/d")
		defer b.Close()
		_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		start := time.Now()
		resp, err := b.Fetch(context.Background(), FetchRequest{
			Partitions: []FetchPartition{
				{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: 0},
				{TopicPartition: TopicPartition{Topic: "t", Partition: 1}, Offset: 7},
			},
			MaxWait: time.Hour,
		})
		require.NoError(t, err)
		require.Zero(t, time.Since(start))
		require.NoError(t, resp.Partitions[0].Err)
		require.Zero(t, resp.Partitions[0].Records.Len())
		require.ErrorIs(t, resp.Partitions[1].Err, ErrOffsetOutOfRange)
	})
}

// TestFetchPartitionMaxBytes: a partition's own MaxBytes bounds it (whole
// batches, at least one for the first partition with data), others take
// the request's PartitionMaxBytes; a negative one is refused.
func TestFetchPartitionMaxBytes(t *testing.T) {
	b, p := boundedPartition(t, vfs.NewMem(), "/d") // batches of 3 records
	first, err := p.ReadBatches(0, 1, 3)
	require.NoError(t, err)
	batchBytes := len(first) // the first three batches are as large, the others larger
	for _, tc := range []struct {
		partMax, reqMax int
		want            []int64
	}{
		{1, 0, []int64{0}},                       // at least one batch
		{2*batchBytes + 1, 0, []int64{0, 3}},     // two fit
		{0, 3 * batchBytes, []int64{0, 3, 6}},    // the request's
		{batchBytes, 3 * batchBytes, []int64{0}}, // the partition's wins
	} {
		resp, err := b.Fetch(context.Background(), FetchRequest{
			Partitions:        []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, MaxBytes: tc.partMax}},
			PartitionMaxBytes: tc.reqMax,
		})
		require.NoError(t, err)
		require.Equal(t, tc.want, batchBases(t, fetchedBytes(t, &resp.Partitions[0])), "%+v", tc)
	}
	_, err = b.Fetch(context.Background(), FetchRequest{
		Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, MaxBytes: -1}},
	})
	require.ErrorIs(t, err, ErrInvalidRequest)
}

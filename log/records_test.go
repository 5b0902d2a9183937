package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// copyRecord is r with its own copies of the bytes that Records reuses.
func copyRecord(r Record) Record {
	r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	if r.Headers != nil {
		hs := make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		r.Headers = hs
	}
	return r
}

// collect ranges over p.Records(from), copying every record.
func collect(t *testing.T, p *Partition, from int64) ([]Record, error) {
	t.Helper()
	var out []Record
	for r, err := range p.Records(from) {
		if err != nil {
			return out, err
		}
		out = append(out, copyRecord(r))
	}
	return out, nil
}

// readFrom reads p from from to the high watermark with Read.
func readFrom(t *testing.T, p *Partition, from int64) []Record {
	t.Helper()
	var out []Record
	for off := from; off < p.HighWatermark(); {
		recs, err := p.Read(off, 1+rand.IntN(4096))
		require.NoError(t, err)
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			out = append(out, copyRecord(r))
		}
		off = recs[len(recs)-1].Offset + 1
	}
	return out
}

// randomPartition fills a partition with random batches, some of them
// compressed with each of Kafka's codecs (as a producer sends them), over
// many small segments, and returns it.
func randomPartition(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand, batches int) *Partition {
	t.Helper()
	b := openT(t, fs, dir)
	t.Cleanup(func() { b.Close() })
	p := createT(t, b, "t", TopicConfig{SegmentBytes: 16 << 10, IndexIntervalBytes: 512, MaxIndexBytes: 4096})
	var bd batch.Builder
	base := time.Now().UnixMilli()
	for i := range batches {
		n := 1 + rng.IntN(40)
		codec := batch.CompressionNone
		if rng.IntN(2) == 0 {
			codec = rng.IntN(5)
		}
		bd.SetCompression(codec)
		bd.Reset(base + int64(i))
		for j := range n {
			var key, value []byte
			if rng.IntN(4) != 0 {
				key = fmt.Appendf(nil, "key-%d", rng.IntN(50))
			}
			if rng.IntN(10) != 0 {
				value = bytes.Repeat(fmt.Appendf(nil, "v%d-%d,", i, j), 1+rng.IntN(30))
			}
			var hs []Header
			for k := range rng.IntN(3) {
				hs = append(hs, Header{Key: fmt.Sprintf("h%d", k), Value: fmt.Appendf(nil, "x%d", rng.IntN(9))})
			}
			bd.Append(base+int64(i)+int64(rng.IntN(5)), key, value, hs)
		}
		_, _, err := p.AppendBatch(bytes.Clone(bd.Bytes()))
		require.NoError(t, err)
	}
	require.Greater(t, p.Segments(), 3)
	return p
}

// TestRecordsEqualsRead: over random logs of plain and compressed batches
// in many segments, Records from any offset yields what Read does.
func TestRecordsEqualsRead(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := seed(t)
		rng := rand.New(rand.NewPCG(s, s))
		p := randomPartition(t, fs, dir, rng, 150)
		end := p.EndOffset()
		froms := []int64{0, 1, end - 1, end}
		for range 20 {
			froms = append(froms, rng.Int64N(end+1))
		}
		for _, from := range froms {
			got, err := collect(t, p, from)
			require.NoError(t, err, "from %d", from)
			want := readFrom(t, p, from)
			require.Equal(t, len(want), len(got), "from %d", from)
			require.Equal(t, want, got, "from %d", from)
		}
	})
}

// TestRecordsReuse: a record's bytes are reused after its iteration (the
// documented contract), and no allocation is made per record.
func TestRecordsReuse(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	for i := range 100 {
		recs := make([]Record, 100)
		for j := range recs {
			recs[j] = Record{Key: fmt.Appendf(nil, "k%d", j), Value: fmt.Appendf(nil, "value-%05d%090d", 100*i+j, 0),
				Headers: []Header{{Key: "h", Value: []byte("v")}}}
		}
		_, err := p.Append(recs...)
		require.NoError(t, err)
	}
	var first []byte
	n := 0
	for r, err := range p.Records(0) {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("value-%05d%090d", r.Offset, 0), string(r.Value))
		require.Equal(t, []Header{{Key: "h", Value: []byte("v")}}, r.Headers)
		if r.Offset == 0 {
			first = r.Value
		}
		n++
	}
	require.Equal(t, 10_000, n)
	// The buffer the first record was in held later chunks since.
	require.NotEqual(t, fmt.Sprintf("value-%05d%090d", 0, 0), string(first))

	allocs := testing.AllocsPerRun(5, func() {
		for _, err := range p.Records(0) {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("%.0f allocations to replay 10000 records", allocs)
	// A few per replay (the iterator, its buffers), none per record. The
	// race detector makes sync.Pool drop items at random, so the pooled
	// buffers are made again now and then (6-11 a replay seen, 4 without).
	limit := 10.0
	if raceEnabled {
		limit = 40
	}
	require.LessOrEqual(t, allocs, limit)
}

// TestRecordsAllocsCompressed: a replay of compressed batches allocates
// nothing per record either: each batch is decompressed into one reused
// buffer.
func TestRecordsAllocsCompressed(t *testing.T) {
	for _, codec := range []int{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLz4, batch.CompressionZstd} {
		t.Run(codecNameT(codec), func(t *testing.T) {
			b := openT(t, vfs.NewMem(), "/data")
			defer b.Close()
			p := createT(t, b, "t", TopicConfig{})
			var bd batch.Builder
			bd.SetCompression(codec)
			for i := range 50 {
				bd.Reset(1)
				for j := range 200 {
					bd.Append(1, nil, fmt.Appendf(nil, `{"id":%d,"kind":"deposit"}`, 200*i+j), nil)
				}
				_, _, err := p.AppendBatch(bytes.Clone(bd.Bytes()))
				require.NoError(t, err)
			}
			allocs := testing.AllocsPerRun(5, func() {
				n := 0
				for _, err := range p.Records(0) {
					if err != nil {
						t.Fatal(err)
					}
					n++
				}
				if n != 10_000 {
					t.Fatalf("%d records", n)
				}
			})
			t.Logf("%s: %.0f allocations to replay 10000 records in 50 batches", codecNameT(codec), allocs)
			if raceEnabled {
				t.Skip("the race detector makes sync.Pool drop the pooled decoders")
			}
			require.LessOrEqual(t, allocs/10_000, 0.01)
		})
	}
}

func codecNameT(codec int) string { return Compression(codec).String() }

// countFS counts the files open on it.
type countFS struct {
	vfs.FS
	open atomic.Int64
}

type countFile struct {
	vfs.File
	fs   *countFS
	once sync.Once
}

func (f *countFile) Close() error {
	f.once.Do(func() { f.fs.open.Add(-1) })
	return f.File.Close()
}

func (c *countFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	c.open.Add(1)
	return &countFile{File: f, fs: c}, nil
}

func (c *countFS) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }
func (c *countFS) Open(name string) (vfs.File, error)   { return c.wrap(c.FS.Open(name)) }
func (c *countFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}

// TestRecordsBreak: breaking out of the loop stops the iteration and
// releases every segment it held: once the broker is closed, no file is
// left open.
func TestRecordsBreak(t *testing.T) {
	fs := &countFS{FS: vfs.NewMem()}
	b := openT(t, fs, "/data")
	p := createT(t, b, "t", small)
	for i := range 300 {
		_, err := p.Append(rec(i))
		require.NoError(t, err)
	}
	require.Greater(t, p.Segments(), 2)
	for _, stopAt := range []int{1, 100, 250} {
		n := 0
		for r, err := range p.Records(5) {
			require.NoError(t, err)
			require.EqualValues(t, 5+n, r.Offset)
			if n++; n == stopAt {
				break
			}
		}
		require.Equal(t, stopAt, n)
	}
	require.NoError(t, b.Close())
	require.Zero(t, fs.open.Load(), "files left open")
}

// TestRecordsOutOfRange: a from outside the log yields one
// *OffsetOutOfRangeError, then nothing.
func TestRecordsOutOfRange(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	for i := range 10 {
		_, err := p.Append(rec(i))
		require.NoError(t, err)
	}
	for _, from := range []int64{-1, 11, 1 << 40} {
		var errs []error
		n := 0
		for r, err := range p.Records(from) {
			n++
			if err != nil {
				errs = append(errs, err)
				require.Zero(t, r.Offset)
			}
		}
		require.Equal(t, 1, n, "from %d", from)
		require.Len(t, errs, 1)
		var oor *OffsetOutOfRangeError
		require.ErrorAs(t, errs[0], &oor)
		require.ErrorIs(t, errs[0], ErrOffsetOutOfRange)
		require.EqualValues(t, from, oor.Requested)
		require.EqualValues(t, 10, oor.End)
	}
	// At the end: nothing, no error.
	for range p.Records(10) {
		t.Fatal("a record at the end offset")
	}
}

// TestRecordsCorrupt: a corrupt batch yields the records before it, then
// one ErrCorrupt, then nothing.
func TestRecordsCorrupt(t *testing.T) {
	dir := t.TempDir()
	b := openT(t, vfs.Default, dir)
	p := createT(t, b, "t", small)
	for i := range 200 {
		_, err := p.Append(rec(i))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	name := filepath.Join(dir, "t-0", segment.Name(0, ".log"))
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	i := bytes.Index(data, []byte("value-10"))
	require.Positive(t, i)
	data[i+3] ^= 0xff
	require.NoError(t, os.WriteFile(name, data, 0o644))

	b = openT(t, vfs.Default, dir)
	defer b.Close()
	p, err = b.Partition("t", 0)
	require.NoError(t, err)
	var got []int64
	var errs []error
	for r, err := range p.Records(0) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, r.Offset)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrCorrupt)
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
}

// TestRecordsGaps: a compacted log's gaps in offsets are skipped over, in
// a batch and between batches.
func TestRecordsGaps(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", small)
	// Batches of offsets [5i, 5i+4] keeping every third offset, as a
	// cleaning pass leaves them (the same base and last offsets); some
	// empty.
	var want []int64
	for i := range 40 {
		var kept []int64
		for off := int64(5 * i); off < int64(5*i+5); off++ {
			if off%3 == 0 && i%7 != 3 {
				kept = append(kept, off)
			}
		}
		want = append(want, kept...)
		_, _, err := p.AppendBatch(gappedBatch(int64(5*i), kept))
		require.NoError(t, err)
	}
	require.EqualValues(t, 200, p.EndOffset())
	require.Greater(t, p.Segments(), 1)
	for _, from := range []int64{0, 1, 50, 51, 199} {
		got := []int64{}
		for r, err := range p.Records(from) {
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint(r.Offset), string(r.Value))
			got = append(got, r.Offset)
		}
		require.Equal(t, slices.DeleteFunc(slices.Clone(want), func(o int64) bool { return o < from }), got, "from %d", from)
	}
}

// TestRecordsStopsAtTheEndOfTheCall: records appended while the iteration
// runs, by the loop's body and by another goroutine, are not part of it.
func TestRecordsStopsAtTheEndOfTheCall(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", small)
	for i := range 500 {
		_, err := p.Append(rec(i))
		require.NoError(t, err)
	}
	seq := p.Records(0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 500; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p.Append(rec(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	n := int64(0)
	for r, err := range seq {
		require.NoError(t, err)
		require.Equal(t, n, r.Offset)
		require.Equal(t, fmt.Sprintf("value-%d", n), string(r.Value))
		if n%50 == 0 {
			_, err := p.Append(rec(-1))
			require.NoError(t, err)
		}
		n++
	}
	close(stop)
	wg.Wait()
	require.EqualValues(t, 500, n)
	require.Greater(t, p.EndOffset(), int64(500))
}

// gappedBatch encodes the offsets kept of [base, base+4] as one
// uncompressed batch with last offset delta 4, each record's value its
// offset: what compaction leaves of a batch of 5.
func gappedBatch(base int64, kept []int64) []byte {
	var bd batch.Builder
	bd.Reset(1)
	for _, off := range kept {
		bd.Append(1, nil, fmt.Append(nil, off), nil)
	}
	b := bytes.Clone(bd.Bytes())
	// The builder numbers records 0, 1, ...: rewrite each record's offset
	// delta. Every field before it is one byte: length, attributes,
	// timestamp delta (0).
	i := batch.HeaderSize
	for _, off := range kept {
		l := int(b[i]) >> 1 // zigzag varint, one byte
		b[i+3] = byte(2 * (off - base))
		i += 1 + l
	}
	binary.BigEndian.PutUint32(b[23:], 4) // last offset delta
	batch.SetCRC(b)
	return b
}

// TestRecordsClosed: a replay of a closed partition yields ErrClosed once,
// whether it starts after the Close or runs into it (past the chunk it had
// read before the Close).
func TestRecordsClosed(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	p := createT(t, b, "t", TopicConfig{SegmentBytes: 64 << 10})
	value := bytes.Repeat([]byte{'v'}, 1024)
	for range 300 { // more than one replayChunk
		_, err := p.Append(Record{Value: value})
		require.NoError(t, err)
	}
	seq := p.Records(0)
	var errs []error
	n := 0
	for r, err := range seq {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Offset == 0 {
			require.NoError(t, b.Close())
		}
		n++
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrClosed)
	require.Less(t, n, 300)
	errs = errs[:0]
	for _, err := range seq {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrClosed)
}

// TestRecordsReadsOn: a replay reads a segment on from where its last
// chunk ended, a read per chunk (no index or header reads between), carries
// a batch cut by a chunk's end over to the next, and reads a batch larger
// than a chunk whole; the records are those Read returns.
func TestRecordsReadsOn(t *testing.T) {
	var reads atomic.Int64
	fs := vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpRead && filepath.Ext(path) == ".log" {
			reads.Add(1)
		}
		return nil
	})
	b := openT(t, fs, "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	small := func(i int) Record { return Record{Value: fmt.Appendf(nil, "v%d-%0100d", i, 0)} }
	var recs []Record
	for i := range 2000 { // about 0.9 chunk of batches of 7 records
		recs = append(recs, small(i))
		if len(recs) == 7 {
			_, err := p.Append(recs...)
			require.NoError(t, err)
			recs = recs[:0]
		}
	}
	_, err := p.Append(Record{Value: bytes.Repeat([]byte{'L'}, replayChunk+1000)}) // larger than a chunk
	require.NoError(t, err)
	for i := range 6000 {
		_, err := p.Append(small(i))
		require.NoError(t, err)
	}
	require.Equal(t, 1, p.Segments())
	size := (*p.segs.Load())[0].Size()

	for _, from := range []int64{0, 1, 1500, p.EndOffset() - 1} {
		reads.Store(0)
		got, err := collect(t, p, from)
		require.NoError(t, err)
		n := reads.Load()
		require.Equal(t, readFrom(t, p, from), got, "from %d", from)
		if from == 0 {
			// A read per chunk, one more for the large batch, and the
			// few of the first lookup (batch headers from the index
			// entry on); a lookup per chunk reads 3-4 times a chunk.
			require.LessOrEqual(t, n, size/replayChunk+6, "reads of a replay of %d bytes", size)
		}
	}
}

// TestRecordsTruncatedUnder: a replay whose segment is truncated and
// appended to again while it runs yields each offset's record as it was or
// as it is now, in order, none skipped: it does not read on from a
// position found before the cut. (After the cut, the batches are where
// they were, but one offset later: read on from there, the replay would
// skip an offset.)
func TestRecordsTruncatedUnder(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	const size = 1010
	value := func(gen string, off int64, n int) []byte {
		v := fmt.Appendf(nil, "%s-%05d-", gen, off)
		return append(v, bytes.Repeat([]byte{'0'}, n-len(v))...)
	}
	appendBatch := func(gen string, sizes ...int) {
		t.Helper()
		end := p.EndOffset()
		var recs []Record
		for i, n := range sizes {
			recs = append(recs, Record{Value: value(gen, end+int64(i), n)})
		}
		_, err := p.Append(recs...)
		require.NoError(t, err)
	}
	for range 400 { // about 5 chunks
		appendBatch("old", size, size, size)
	}
	end := p.EndOffset()
	next := int64(0)
	cut := false
	for r, err := range p.Records(0) {
		require.NoError(t, err)
		require.Equal(t, next, r.Offset)
		if !bytes.HasPrefix(r.Value, fmt.Appendf(nil, "old-%05d-", r.Offset)) {
			require.True(t, cut, "offset %d", r.Offset)
			require.Equal(t, string(fmt.Appendf(nil, "new-%05d-", r.Offset)), string(r.Value[:10]))
		}
		next++
		if r.Offset == 300 && !cut {
			// Cut below the chunk being read, then append a batch of
			// four records in the bytes of three (9 bytes of framing
			// each), and batches of three as before.
			require.NoError(t, p.TruncateTo(249)) // a batch boundary
			require.EqualValues(t, 249, p.EndOffset())
			v := (3*size - 9) / 4
			appendBatch("new", v, v, v, 3*size-9-3*v)
			for p.EndOffset() < end {
				appendBatch("new", size, size, size)
			}
			cut = true
		}
	}
	require.True(t, cut)
	require.GreaterOrEqual(t, next, end)
}

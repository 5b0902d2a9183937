package log

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// tailValue is the value of record i of the tail tests: 4 KiB.
func tailValue(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 4<<10) }

// produceTail sends n records of 4 KiB through a Producer of b (the trusted
// path) in batches just over tailMinBatch and waits for them.
func produceTail(t *testing.T, b *Broker, topic string, from, n int) {
	t.Helper()
	pr, err := NewProducer(b, ProducerConfig{BatchBytes: tailMinBatch + 16<<10, Linger: time.Minute, Timeout: time.Hour})
	require.NoError(t, err)
	for i := from; i < from+n; i++ {
		pr.SendAsync(Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: tailValue(i)},
			func(_ Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
	}
	require.NoError(t, pr.Close())
}

// sliceBytes is Slice then Bytes.
func sliceBytes(t *testing.T, p *Partition, offset int64, maxBytes int) []byte {
	t.Helper()
	bs, err := p.Slice(offset, maxBytes, p.EndOffset())
	require.NoError(t, err)
	defer bs.Release()
	raw, err := bs.Bytes()
	require.NoError(t, err)
	return raw
}

// sliceBuilt says whether p's batches from offset come from the tail
// (Batches.bytes: built by this process, not CRC-checked again).
func sliceBuilt(t *testing.T, p *Partition, offset int64, maxBytes int) bool {
	t.Helper()
	bs, err := p.Slice(offset, maxBytes, p.EndOffset())
	require.NoError(t, err)
	defer bs.Release()
	_, tail, err := bs.bytes()
	require.NoError(t, err)
	return tail != nil
}

// TestTailReads: the last batches a Producer of the process appended are
// read from memory, without a copy, and are byte for byte what the file
// holds, whatever range is asked for; a truncation empties the tail, so
// what is appended at the same positions afterwards is what reads return.
func TestTailReads(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	produceTail(t, b, "t", 0, 400) // 400 records of 4 KiB: 6 batches, fewer than tailSlots

	r := p.tail.Load()
	require.NotNil(t, r)
	require.Greater(t, r.n, 2)
	last := r.batches[r.n-1]
	h, err := batch.ParseHeader(last.b)
	require.NoError(t, err)

	// One batch: the tail's own slice, twice the same memory.
	one := sliceBytes(t, p, h.BaseOffset, len(last.b))
	require.Same(t, &last.b[0], &one[0], "the newest batch comes from the tail")
	require.Same(t, &one[0], &sliceBytes(t, p, h.BaseOffset, len(last.b))[0])
	require.True(t, sliceBuilt(t, p, h.BaseOffset, len(last.b)), "the tail's bytes are this process's, their CRC not checked again")

	// Every start and size: what the file holds (ReadBatches reads it).
	for off := int64(0); off < p.EndOffset(); off += 37 {
		for _, max := range []int{1, tailMinBatch, 3 * tailMinBatch, 16 << 20} {
			file, err := p.ReadBatches(off, max, p.EndOffset())
			require.NoError(t, err)
			require.Equal(t, file, sliceBytes(t, p, off, max), "offset %d, max %d", off, max)
		}
	}
	// A Consumer gets the records sent.
	c, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t"}})
	require.NoError(t, err)
	defer c.Close()
	got := 0
	for got < 400 {
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		for _, rc := range recs {
			require.Equal(t, int64(got), rc.Offset)
			require.Equal(t, fmt.Sprintf("k%d", got), string(rc.Key))
			require.Equal(t, tailValue(got), rc.Value)
			got++
		}
	}

	// Truncate the newest batch away and append, at its position, a batch
	// of the same size with other bytes (a follower's log after its leader
	// changed): reads return the new bytes.
	cut := h.BaseOffset
	require.NoError(t, p.TruncateTo(cut))
	require.Equal(t, cut, p.EndOffset())
	require.Nil(t, p.tail.Load(), "a truncation empties the tail")
	other := bytes.Clone(last.b)
	other[len(other)-2] ^= 0xff // the last record's last value byte
	batch.SetCRC(other)
	_, _, err = p.AppendBatch(other)
	require.NoError(t, err)
	raw := sliceBytes(t, p, cut, 1<<20)
	require.Equal(t, len(last.b), len(raw))
	file, err := p.ReadBatches(cut, 1<<20, p.EndOffset())
	require.NoError(t, err)
	require.Equal(t, file, raw)
	require.Equal(t, other[len(other)-2], raw[len(raw)-2])
	require.False(t, sliceBuilt(t, p, cut, 1<<20), "without a tail, the file's bytes: checked")
	require.Zero(t, b.store.tails.used.Load(), "an append not by the trusted path keeps no tail")
}

// TestTailBudget: the tails of a Store never hold more than its budget,
// and give all of it back when their partitions close.
func TestTailBudget(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	b.store.tails.max = 3 * tailMinBatch // two batches
	for i := range 3 {
		createT(t, b, fmt.Sprintf("t%d", i), TopicConfig{})
	}
	for round := range 3 {
		for i := range 3 {
			produceTail(t, b, fmt.Sprintf("t%d", i), round*64, 64) // one batch just over tailMinBatch
			require.LessOrEqual(t, b.store.tails.used.Load(), b.store.tails.max)
		}
	}
	require.Positive(t, b.store.tails.used.Load())
	require.NoError(t, b.Close())
	require.Zero(t, b.store.tails.used.Load())
}

// TestTailSmallBatches: a Producer gives no batch smaller than tailMinBatch
// to the tail: it reuses their buffers.
func TestTailSmallBatches(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	pr, err := NewProducer(b, ProducerConfig{BatchBytes: 16 << 10})
	require.NoError(t, err)
	for i := range 100 {
		_, err := pr.Send(context.Background(), Record{Topic: "t", Value: tailValue(i)})
		require.NoError(t, err)
	}
	require.NoError(t, pr.Close())
	require.Nil(t, p.tail.Load())
	require.Zero(t, b.store.tails.used.Load())
}

// TestProducerOwnsGivenBatch: a batch whose bytes went to the broker is
// copied before the Producer writes to it (a retry, a new sequence), so the
// bytes the broker keeps never change; and the next batch is built in a new
// buffer.
func TestProducerOwnsGivenBatch(t *testing.T) {
	var b pbatch
	b.bd.Append(1, []byte("k"), []byte("v"), nil)
	b.finish()
	kept := b.raw
	want := bytes.Clone(kept)
	b.given, b.detach = true, true

	b.own()
	require.False(t, b.given)
	require.NotSame(t, &kept[0], &b.raw[0])
	batch.SetBaseOffset(b.raw, 42)
	batch.SetProducer(b.raw, 7, 1, 3)
	require.Equal(t, want, kept)

	b.bd.Detach()
	b.bd.Reset(2)
	b.bd.Append(2, []byte("other"), []byte("bytes"), nil)
	require.NotSame(t, &kept[0], &b.bd.Bytes()[0])
	require.Equal(t, want, kept)
}

// TestTailSpans: a Consumer reading the tail takes the records of a batch
// from the spans its Producer recorded (batch.Span), and gets what decoding
// the file gives: null and empty keys and values, timestamps, offsets. A
// batch with a record with headers has no spans, and its records are parsed.
func TestTailSpans(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	c, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t"}})
	require.NoError(t, err)
	defer c.Close()
	// A long linger: the batches that fill go, the last one waits for
	// Close (a batch below tailMinBatch would empty the tail).
	pr, err := NewProducer(b, ProducerConfig{BatchBytes: tailMinBatch + 16<<10, Linger: time.Hour, Timeout: 2 * time.Hour})
	require.NoError(t, err)
	const n = 500
	for i := range n {
		r := Record{Topic: "t", Value: tailValue(i), Timestamp: time.UnixMilli(int64(1e12 + i*i - 40*i))}
		switch i % 5 {
		case 0:
			r.Key = []byte{}
		case 1:
			r.Key = fmt.Appendf(nil, "k%d", i)
		case 2:
			r.Value = nil
		case 3:
			r.Value = []byte{}
		}
		if i >= n/2 {
			r.Headers = []Header{{Key: "h", Value: []byte{byte(i)}}}
		}
		pr.SendAsync(r, func(_ Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	var got []Record
	for len(got) < 400 { // the full batches: 500 less the last one's records
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		got = append(got, recs...)
	}

	r := p.tail.Load()
	require.NotNil(t, r)
	with, without := 0, 0
	for _, tb := range r.batches[:r.n] {
		h, err := batch.ParseHeader(tb.b)
		require.NoError(t, err)
		if h.LastOffset() < n/2 {
			require.Len(t, tb.spans, int(h.NumRecords), "a batch without headers has spans")
			with++
		} else {
			require.Nil(t, tb.spans, "a batch with headers has none")
			without++
		}
	}
	require.Positive(t, with)
	require.Positive(t, without)

	file, err := p.ReadBatches(0, 64<<20, p.EndOffset())
	require.NoError(t, err)
	var hdrs []Header
	want, _, err := decodeFrom(nil, &hdrs, file, TopicPartition{Topic: "t"}, 0)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range got {
		g, w := got[i], want[i]
		require.Equal(t, w.Offset, g.Offset)
		require.True(t, w.Timestamp.Equal(g.Timestamp), "record %d: timestamp %v, want %v", i, g.Timestamp, w.Timestamp)
		require.Equal(t, w.Key == nil, g.Key == nil, "record %d: null key", i)
		require.Equal(t, w.Key, g.Key, "record %d", i)
		require.Equal(t, w.Value == nil, g.Value == nil, "record %d: null value", i)
		require.Equal(t, w.Value, g.Value, "record %d", i)
		require.Equal(t, w.Headers, g.Headers, "record %d", i)
	}
	require.NoError(t, pr.Close())
}

// TestTailKeepsProducedCopies: a batch of tailCopyMax bytes or fewer
// appended with AppendBatch (a Kafka produce's, in a buffer its server
// reuses) is kept in the tail as a copy: a read at the end of the log gets
// it from memory, byte for byte what the file holds, whatever the caller
// does with its buffer afterwards; a larger one empties the tail.
func TestTailKeepsProducedCopies(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	var sent [][]byte
	for i := range tailCopySlots + 4 {
		buf := encodedBatch([]Record{{Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{byte(i)}, 100)}})
		base, _, err := p.AppendBatch(buf)
		require.NoError(t, err)
		sent = append(sent, bytes.Clone(buf)) // with its base offset set
		clear(buf)                            // the server reuses its buffer
		require.True(t, sliceBuilt(t, p, base, 1<<20), "batch %d: the newest batch is read from the tail", i)
		file, err := p.ReadBatches(base, 1<<20, p.EndOffset())
		require.NoError(t, err)
		require.Equal(t, sent[i], file)
		require.Equal(t, file, sliceBytes(t, p, base, 1<<20))
	}
	// The tail holds the last tailCopySlots batches: from the oldest of
	// them on, a read gets them from memory; before it, from the file.
	first := int64(len(sent) - tailCopySlots)
	require.True(t, sliceBuilt(t, p, first, 1<<20))
	require.False(t, sliceBuilt(t, p, first-1, 1<<20))
	require.Equal(t, bytes.Join(sent[first:], nil), sliceBytes(t, p, first, 1<<20))
	require.Equal(t, bytes.Join(sent, nil), sliceBytes(t, p, 0, 1<<20))
	require.Positive(t, b.store.tails.used.Load())

	// A batch over tailCopyMax is not copied: the tail empties.
	big := encodedBatch([]Record{{Value: bytes.Repeat([]byte{1}, tailCopyMax)}})
	base, _, err := p.AppendBatch(big)
	require.NoError(t, err)
	require.Nil(t, p.tail.Load())
	require.Zero(t, b.store.tails.used.Load())
	require.False(t, sliceBuilt(t, p, base, 1<<20))
	require.Equal(t, big, sliceBytes(t, p, base, 1<<20))
}

// BenchmarkAppendBatchSmallTail is what keeping a copy of a small batch in
// the tail (TestTailKeepsProducedCopies) costs AppendBatch: one record of
// 100 B per batch, as a Kafka producer with linger 0 sends it, appended
// with the tail ("copy") and without one ("none": what every append did
// before).
func BenchmarkAppendBatchSmallTail(b *testing.B) {
	for _, tail := range []bool{true, false} {
		name := "copy"
		if !tail {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			_, p := benchBroker(b, b.TempDir(), pageCache)
			if !tail {
				p.tails = nil
			}
			enc := encodedBatch(records(1, 100))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.AppendBatch(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

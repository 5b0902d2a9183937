package log

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/strata-log/strata/segment/batch"
	"github.com/stretchr/testify/require"
)

// TestProducerEncodesAhead: while the first batch of a partition is in
// flight, the batches closed behind it are compressed by the encoders (an
// uncompressed one is finished by the caller that closed it), not left for
// the sender: once every goroutine has settled, each of them is finished
// and none is encoding, though the broker has answered nothing.
// Then every record is stored once, in order, in batches of the producer's
// codec, and every callback has its record's offset.
func TestProducerEncodesAhead(t *testing.T) {
	// Not zstd: its pooled encoders hold channels, which must not be made
	// inside a synctest bubble and used outside it by the next test.
	for _, codec := range []Compression{CompressionLz4, CompressionNone} {
		t.Run(codec.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, c := prodBroker(t, TopicConfig{})
				hold := make(chan struct{})
				c.setHold(hold)
				batchBytes := 8 << 10
				p := newProd(t, c, ProducerConfig{Compression: codec, BatchBytes: batchBytes})
				release := sync.OnceFunc(func() { close(hold) })
				// Released before p.Close if the test fails while holding.
				t.Cleanup(release)
				value := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
				n := 12 * batchBytes / len(value)
				col := &collector{}
				for i := range n {
					p.SendAsync(Record{Topic: "t", Key: fmt.Appendf(nil, "k%05d", i), Value: value}, col.done)
				}
				synctest.Wait()

				p.mu.Lock()
				ps := p.topics["t"].parts[0]
				closed, inFlight := 0, 0
				for bt := ps.head; bt != nil; bt = bt.next {
					closed++
					if bt.inAttempt {
						inFlight++
						continue
					}
					require.False(t, bt.encoding, "batch %d: encoded", bt.seq)
					require.NotNil(t, bt.raw, "batch %d: finished ahead of its turn", bt.seq)
					h, err := batch.Validate(bt.raw)
					require.NoError(t, err, "batch %d", bt.seq)
					require.Equal(t, int(codec), h.Compression())
					require.EqualValues(t, len(bt.slots), h.NumRecords)
				}
				encoders, queued := p.encoders, len(p.encQ)-p.encHead
				p.mu.Unlock()
				require.Equal(t, 1, inFlight, "the first batch is held")
				require.GreaterOrEqual(t, closed, 10, "batches closed behind it")
				require.Zero(t, encoders, "the encoders are done and gone")
				require.Zero(t, queued)

				release()
				require.NoError(t, p.Flush(t.Context()))
				recs, errs := col.get()
				require.Len(t, recs, n)
				stored := readAll(t, b, 0)
				require.Len(t, stored, n)
				for i := range n {
					require.NoError(t, errs[i])
					require.EqualValues(t, i, recs[i].Offset, "callbacks in order")
					require.Equal(t, fmt.Sprintf("k%05d", i), string(stored[i].Key))
					require.Equal(t, value, stored[i].Value)
				}
				part, err := b.Partition("t", 0)
				require.NoError(t, err)
				raw, err := part.ReadBatches(0, 1<<30, part.EndOffset())
				require.NoError(t, err)
				for len(raw) > 0 {
					h, err := batch.ParseHeader(raw)
					require.NoError(t, err)
					require.Equal(t, int(codec), h.Compression(), "stored as the producer compressed it")
					raw = raw[h.Size():]
				}
			})
		})
	}
}

// TestProducerEncoderSequenceChange: a sequence given to a batch while an
// encoder compresses it (an idempotent producer renumbering it) is written
// into the finished batch, whose CRC stays valid, and the encoder does not
// race with it: the builder is not touched meanwhile.
func TestProducerEncoderSequenceChange(t *testing.T) {
	_, c := prodBroker(t, TopicConfig{})
	p := newProd(t, c, ProducerConfig{Idempotent: true, Compression: CompressionLz4})
	p.mu.Lock()
	bt := p.newBatchLocked()
	bt.bd.Reset(1000)
	bt.bd.SetProducer(7, 1, 0)
	for i := range 100 {
		bt.bd.Append(1000, nil, fmt.Appendf(nil, "value-%03d", i), nil)
		bt.slots = append(bt.slots, slot{})
	}
	bt.encoding = true
	p.setSeqLocked(bt, ProducerID{ID: 7, Epoch: 2}, 40)
	p.mu.Unlock()

	bt.finish() // as encodeLoop does, outside mu
	h, err := batch.Validate(bt.raw)
	require.NoError(t, err)
	require.EqualValues(t, 1, h.ProducerEpoch, "built with the sequence it had")
	require.EqualValues(t, 0, h.BaseSequence)

	p.mu.Lock()
	p.encodedLocked(encodeJob{ps: &partState{}, b: bt})
	p.mu.Unlock()
	h, err = batch.Validate(bt.raw)
	require.NoError(t, err, "the CRC covers the new sequence")
	require.EqualValues(t, 7, h.ProducerID)
	require.EqualValues(t, 2, h.ProducerEpoch)
	require.EqualValues(t, 40, h.BaseSequence)
	require.False(t, bt.encoding)
	require.False(t, bt.seqStale)
	var got []string
	_, err = batch.Decode(bt.raw, func(r *batch.Record) error {
		got = append(got, string(r.Value))
		return nil
	})
	require.NoError(t, err)
	require.Len(t, got, 100)
	require.Equal(t, "value-099", got[99])
}

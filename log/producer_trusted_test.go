package log

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestProducerTrustedPath: a Producer whose Client is a *Broker hands it
// its batches by the trusted path (no validation again), and what that
// stores is exactly what full validation accepts: every stored batch passes
// batch.ValidateProduced, with the topic's codec (recompressed by the
// validating path when it differs from the producer's), and the records are
// those sent, idempotent or not.
func TestProducerTrustedPath(t *testing.T) {
	for _, codec := range allCodecs {
		for _, topic := range []TopicCompression{TopicCompressionProducer, TopicCompressionZstd, TopicCompressionNone} {
			for _, idem := range []bool{false, true} {
				name := codec.String() + "/" + topic.String()
				if idem {
					name += "/idempotent"
				}
				t.Run(name, func(t *testing.T) {
					b := openT(t, vfs.NewMem(), "/data")
					defer b.Close()
					p := createT(t, b, "t", TopicConfig{Compression: topic})
					// One batch in flight: the order of several is the
					// sequence checks' business (appendValid's), not this path's.
					pr, err := NewProducer(b, ProducerConfig{Compression: codec, Idempotent: idem, MaxInFlight: 1, Linger: time.Minute, Timeout: time.Hour, BatchBytes: 4 << 10})
					require.NoError(t, err)
					require.Same(t, b, pr.broker, "a *Broker takes the trusted path")
					base := time.UnixMilli(1_700_000_000_000)
					var want []Record
					for i := range 200 {
						r := codecRec(i, base.Add(time.Duration(i)*time.Millisecond))
						want = append(want, r)
						r.Topic = "t"
						pr.SendAsync(r, func(_ Record, err error) {
							if err != nil {
								t.Error(err)
							}
						})
					}
					require.NoError(t, pr.Close())

					raw, err := p.ReadBatches(p.StartOffset(), 64<<20, p.EndOffset())
					require.NoError(t, err)
					wantCodec := int(codec)
					if c, ok := topic.codec(); ok {
						wantCodec = int(c)
					}
					batches := 0
					require.NoError(t, batch.Batches(raw, func(bb []byte, h batch.Header) error {
						batches++
						vh, err := batch.ValidateProduced(bb)
						require.NoError(t, err)
						require.Equal(t, wantCodec, vh.Compression())
						require.Equal(t, idem, vh.ProducerID >= 0)
						return nil
					}))
					require.Greater(t, batches, 2, "several batches")
					got, err := p.Read(0, 64<<20)
					require.NoError(t, err)
					requireSameRecords(t, want, got)
				})
			}
		}
	}
}

// TestProducerWrappedBrokerValidates: a Client that wraps or embeds a
// *Broker is not the Broker: its ProduceBatch is called for every batch
// (the trusted path is for the Broker itself only).
func TestProducerWrappedBrokerValidates(t *testing.T) {
	_, c := prodBroker(t, TopicConfig{})
	pr := newProd(t, c, ProducerConfig{Linger: -1})
	require.Nil(t, pr.broker)
	for i := range 10 {
		_, err := pr.Send(context.Background(), Record{Topic: "t", Value: val(i)})
		require.NoError(t, err)
	}
	total := 0
	for _, n := range c.batchSizes() {
		total += n
	}
	require.Equal(t, 10, total, "every record went through the wrapper's ProduceBatch")
}

// TestProduceBuiltRefuses: the trusted path checks what ProduceBatch checks
// of the request, and refuses what is not one whole batch, changing
// nothing.
func TestProduceBuiltRefuses(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{MaxMessageBytes: 200})
	createT(t, b, "isr", TopicConfig{})
	withMinInSync(t, b, "isr", 2)
	ctx := context.Background()
	small := builtBatch(batch.CompressionNone, []Record{{Value: []byte("x")}})
	large := builtBatch(batch.CompressionNone, []Record{{Value: make([]byte, 300)}})

	for _, tc := range []struct {
		name string
		tp   TopicPartition
		raw  []byte
		want error
	}{
		{"unknown topic", TopicPartition{Topic: "nope"}, small, ErrUnknownTopic},
		{"unknown partition", TopicPartition{Topic: "t", Partition: 3}, small, ErrUnknownPartition},
		{"not enough replicas", TopicPartition{Topic: "isr"}, small, ErrNotEnoughReplicas},
		{"too large", TopicPartition{Topic: "t"}, large, ErrRecordTooLarge},
		{"short", TopicPartition{Topic: "t"}, small[:batch.HeaderSize-1], batch.ErrShort},
		{"bytes after", TopicPartition{Topic: "t"}, append(append([]byte(nil), small...), 0), ErrCorrupt},
		{"two batches", TopicPartition{Topic: "t"}, append(append([]byte(nil), small...), small...), ErrCorrupt},
	} {
		_, err := b.produceBuilt(ctx, tc.tp, tc.raw, nil, AcksAll, false)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	require.EqualValues(t, 0, p.EndOffset(), "nothing appended")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := b.produceBuilt(cctx, TopicPartition{Topic: "t"}, small, nil, AcksAll, false)
	require.True(t, errors.Is(err, context.Canceled))

	res, err := b.produceBuilt(ctx, TopicPartition{Topic: "t"}, small, nil, AcksAll, false)
	require.NoError(t, err)
	require.EqualValues(t, 0, res.BaseOffset)
	require.EqualValues(t, 1, p.EndOffset())
}

// TestProducerDefaultBatchFits: a full batch of the default BatchBytes,
// of incompressible records, fits in a topic's default MaxMessageBytes with
// every codec: no produce is refused as too large (and split).
func TestProducerDefaultBatchFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			_, c := prodBroker(t, TopicConfig{})
			pr := newProd(t, c, ProducerConfig{Compression: codec, Linger: time.Minute, Timeout: time.Hour})
			for range 2500 {
				pr.SendAsync(Record{Topic: "t", Value: value}, func(_ Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
			require.NoError(t, pr.Flush(context.Background()))
			c.mu.Lock()
			defer c.mu.Unlock()
			require.GreaterOrEqual(t, len(c.calls), 3)
			for i, call := range c.calls {
				require.NoError(t, call.err)
				if i < len(c.calls)-1 { // the last one: what Flush found
					require.Greater(t, call.records, 900, "full batches of about 1 MB")
				}
			}
		})
	}
}

// TestProducerCompressesOnTwoGoroutines: a compressed producer whose
// sender is busy has its full batches compressed by the sending goroutines
// themselves, outside the lock, while the senders keep the partition's
// order: with several goroutines sending, every record is stored once, each
// goroutine's records in the order it sent them, every batch valid. Run
// with -race, it checks that no batch is touched by two goroutines at once.
func TestProducerCompressesOnTwoGoroutines(t *testing.T) {
	for _, codec := range []Compression{CompressionLz4, CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			b := openT(t, vfs.NewMem(), "/data")
			defer b.Close()
			p := createT(t, b, "t", TopicConfig{})
			pr, err := NewProducer(b, ProducerConfig{Compression: codec, BatchBytes: 2 << 10, Linger: time.Minute, Timeout: time.Hour})
			require.NoError(t, err)
			const senders, each = 4, 500
			done := make(chan struct{})
			for g := range senders {
				go func() {
					defer func() { done <- struct{}{} }()
					for i := range each {
						r := codecRec(g*each+i, time.UnixMilli(1_700_000_000_000))
						r.Topic, r.Key = "t", []byte{byte(g)}
						pr.SendAsync(r, func(_ Record, err error) {
							if err != nil {
								t.Error(err)
							}
						})
					}
				}()
			}
			for range senders {
				<-done
			}
			require.NoError(t, pr.Close())

			raw, err := p.ReadBatches(p.StartOffset(), 64<<20, p.EndOffset())
			require.NoError(t, err)
			require.NoError(t, batch.Batches(raw, func(bb []byte, _ batch.Header) error {
				_, err := batch.ValidateProduced(bb)
				return err
			}))
			got, err := p.Read(0, 64<<20)
			require.NoError(t, err)
			require.Len(t, got, senders*each)
			next := make([]int, senders)
			for _, r := range got {
				g := int(r.Key[0])
				want := codecRec(g*each+next[g], time.UnixMilli(1_700_000_000_000))
				require.Equal(t, want.Value, r.Value, "sender %d record %d", g, next[g])
				next[g]++
			}
		})
	}
}

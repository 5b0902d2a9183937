package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLz4, CompressionZstd}

// codecRec is record i of a compression test: a JSON-like value, a header
// on every other record, a null value on every seventh.
func codecRec(i int, ts time.Time) Record {
	r := Record{
		Key:       fmt.Appendf(nil, "user-%d", i%13),
		Value:     fmt.Appendf(nil, `{"id":%d,"name":"user %d","tags":["a","b","c"],"score":%d}`, i, i%13, i*7),
		Timestamp: ts,
	}
	if i%2 == 0 {
		r.Headers = []Header{{Key: "trace", Value: fmt.Appendf(nil, "t-%d", i)}}
	}
	if i%7 == 6 {
		r.Value = nil
	}
	return r
}

func requireSameRecords(t *testing.T, want, got []Record) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.EqualValues(t, i, got[i].Offset)
		require.Equal(t, want[i].Key, got[i].Key, "record %d", i)
		require.Equal(t, want[i].Value, got[i].Value, "record %d", i)
		require.Equal(t, want[i].Timestamp.UnixMilli(), got[i].Timestamp.UnixMilli(), "record %d", i)
		require.Equal(t, len(want[i].Headers), len(got[i].Headers), "record %d", i)
		for j := range want[i].Headers {
			require.Equal(t, want[i].Headers[j].Key, got[i].Headers[j].Key)
			require.Equal(t, want[i].Headers[j].Value, got[i].Headers[j].Value)
		}
	}
}

// codecsOf returns the codec of every batch of p.
func codecsOf(t *testing.T, p *Partition) []int {
	t.Helper()
	raw, err := p.ReadBatches(p.StartOffset(), 64<<20, p.EndOffset())
	require.NoError(t, err)
	var out []int
	require.NoError(t, batch.Batches(raw, func(_ []byte, h batch.Header) error {
		out = append(out, h.Compression())
		return nil
	}))
	return out
}

// TestProducerCompression: a producer with each codec stores compressed batches,
// and Read, DecodeRecords, Consumer.Poll and OffsetForTime see the records, before
// and after the broker reopens (with and without a clean shutdown).
func TestProducerCompression(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			b := openT(t, fs, "/data")
			p := createT(t, b, "t", TopicConfig{})
			pr, err := NewProducer(b, ProducerConfig{Compression: codec, Linger: time.Minute, Timeout: time.Hour, BatchBytes: 8 << 10})
			require.NoError(t, err)
			base := time.UnixMilli(1_700_000_000_000)
			var want []Record
			for i := range 300 {
				r := codecRec(i, base.Add(time.Duration(i)*time.Second))
				want = append(want, r)
				r.Topic = "t"
				pr.SendAsync(r, func(_ Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
			require.NoError(t, pr.Flush(context.Background()))
			require.NoError(t, pr.Close())

			cs := codecsOf(t, p)
			require.Greater(t, len(cs), 2, "several batches")
			for _, c := range cs {
				require.Equal(t, int(codec), c)
			}
			check := func(p *Partition) {
				got, err := p.Read(0, 64<<20)
				require.NoError(t, err)
				requireSameRecords(t, want, got)
				// One record from the middle of a batch.
				got, err = p.Read(150, 1)
				require.NoError(t, err)
				require.EqualValues(t, 150, got[0].Offset)
				raw, err := p.ReadBatches(0, 64<<20, p.EndOffset())
				require.NoError(t, err)
				got, err = DecodeRecords(raw)
				require.NoError(t, err)
				requireSameRecords(t, want, got)
				for _, i := range []int{0, 1, 77, 150, 299} {
					off, err := p.OffsetForTime(base.Add(time.Duration(i)*time.Second - time.Millisecond))
					require.NoError(t, err)
					require.EqualValues(t, i, off)
				}
				c, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t"}, MaxWait: time.Millisecond})
				require.NoError(t, err)
				defer c.Close()
				var polled []Record
				for len(polled) < len(want) {
					recs, err := c.Poll(context.Background())
					require.NoError(t, err)
					polled = append(polled, recs...)
				}
				requireSameRecords(t, want, polled)
			}
			check(p)
			require.NoError(t, b.Close())
			b = openT(t, fs, "/data")
			tp, err := b.Topic("t")
			require.NoError(t, err)
			p, err = tp.Partition(0)
			require.NoError(t, err)
			check(p)
			// A crash: only synced bytes survive, and recovery scans the
			// compressed batches.
			require.NoError(t, p.Flush())
			fs.Crash()
			b = openT(t, fs, "/data")
			tp, err = b.Topic("t")
			require.NoError(t, err)
			p, err = tp.Partition(0)
			require.NoError(t, err)
			check(p)
			require.NoError(t, b.Close())
		})
	}
}

// builtBatch encodes recs with codec, as a producer sends them.
func builtBatch(codec int, recs []Record) []byte {
	var bd batch.Builder
	bd.SetCompression(codec)
	bd.Reset(recs[0].Timestamp.UnixMilli())
	for _, r := range recs {
		bd.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
	}
	return append([]byte(nil), bd.Bytes()...)
}

// TestAppendBatchCompressed: a compressed batch is stored byte for byte as it
// arrived (but for its base offset); one whose payload is corrupt, or holds
// other records than its header says, is refused with ErrCorrupt and changes
// nothing.
func TestAppendBatchCompressed(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	recs := make([]Record, 40)
	for i := range recs {
		recs[i] = codecRec(i, base.Add(time.Duration(i)*time.Millisecond))
	}
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String(), func(t *testing.T) {
			b := openT(t, vfs.NewMem(), "/data")
			defer b.Close()
			p := createT(t, b, "t", TopicConfig{})
			_, err := p.Append(recs[0])
			require.NoError(t, err)

			good := builtBatch(int(codec), recs)
			sent := append([]byte(nil), good...)
			first, next, err := p.AppendBatch(sent)
			require.NoError(t, err)
			require.EqualValues(t, 1, first)
			require.EqualValues(t, 41, next)
			raw, err := p.ReadBatches(1, 1<<20, p.EndOffset())
			require.NoError(t, err)
			stored := append([]byte(nil), raw[:len(good)]...)
			batch.SetBaseOffset(stored, 0)
			copy(stored[12:16], good[12:16]) // the leader stamps its epoch
			require.Equal(t, good, stored, "stored as it arrived")

			size, end := p.Size(), p.EndOffset()
			plain := builtBatch(batch.CompressionNone, recs)
			withPayload := func(payload []byte) []byte {
				out := append(append([]byte(nil), good[:batch.HeaderSize]...), payload...)
				binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
				binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
				return out
			}
			flipped := append([]byte(nil), good[batch.HeaderSize:]...)
			flipped[len(flipped)/2] ^= 0xff
			extra := builtBatch(int(codec), append(recs[:len(recs):len(recs)], recs[0]))
			badCRC := append([]byte(nil), good...)
			badCRC[len(badCRC)-1] ^= 1
			for name, bad := range map[string][]byte{
				"bad CRC":                          badCRC,
				"uncompressed payload":             withPayload(plain[batch.HeaderSize:]),
				"cut payload":                      withPayload(good[batch.HeaderSize : len(good)-4]),
				"a record more than the header":    withPayload(extra[batch.HeaderSize:]),
				"flipped byte (checksummed codec)": withPayload(flipped),
			} {
				if name == "flipped byte (checksummed codec)" && codec == CompressionSnappy {
					continue // a raw snappy block carries no checksum
				}
				_, _, err := p.AppendBatch(bad)
				require.ErrorIs(t, err, ErrCorrupt, name)
				require.Equal(t, size, p.Size(), name)
				require.Equal(t, end, p.EndOffset(), name)
			}
			got, err := p.Read(0, 1<<20)
			require.NoError(t, err)
			require.Len(t, got, 41)
		})
	}
}

// TestAppendBatchCompressedGap: Kafka refuses a producer's compressed batch
// whose inner offsets are not 0..n-1.
func TestAppendBatchCompressedGap(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	good := builtBatch(batch.CompressionLz4, []Record{codecRec(0, time.UnixMilli(5)), codecRec(1, time.UnixMilli(5))})
	// Claim a last offset delta of 2 with two records: a gap.
	binary.BigEndian.PutUint32(good[23:], 2)
	batch.SetCRC(good)
	_, err := batch.Validate(good)
	require.NoError(t, err, "a compacted batch is valid")
	_, _, err = p.AppendBatch(good)
	require.ErrorIs(t, err, ErrCorrupt)
	require.EqualValues(t, 0, p.EndOffset())
}

// TestTopicCompression: a topic's compression type recompresses what arrives
// with another codec, and Append compresses with it; the default keeps the
// producer's codec.
func TestTopicCompression(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	recs := []Record{codecRec(0, base), codecRec(1, base), codecRec(2, base.Add(time.Second))}
	for _, tc := range []struct {
		topic TopicCompression
		want  func(sent int) int
	}{
		{TopicCompressionProducer, func(sent int) int { return sent }},
		{TopicCompressionNone, func(int) int { return batch.CompressionNone }},
		{TopicCompressionGzip, func(int) int { return batch.CompressionGzip }},
		{TopicCompressionSnappy, func(int) int { return batch.CompressionSnappy }},
		{TopicCompressionLz4, func(int) int { return batch.CompressionLz4 }},
		{TopicCompressionZstd, func(int) int { return batch.CompressionZstd }},
	} {
		t.Run(tc.topic.String(), func(t *testing.T) {
			b := openT(t, vfs.NewMem(), "/data")
			defer b.Close()
			p := createT(t, b, "t", TopicConfig{Compression: tc.topic})
			var want []Record
			var wantCodecs []int
			for _, sent := range allCodecs {
				_, _, err := p.AppendBatch(builtBatch(int(sent), recs))
				require.NoError(t, err)
				want = append(want, recs...)
				wantCodecs = append(wantCodecs, tc.want(int(sent)))
			}
			_, err := p.Append(recs...)
			require.NoError(t, err)
			want = append(want, recs...)
			wantCodecs = append(wantCodecs, tc.want(batch.CompressionNone))
			require.Equal(t, wantCodecs, codecsOf(t, p))
			got, err := p.Read(0, 1<<20)
			require.NoError(t, err)
			for i := range want {
				want[i].Offset = int64(i)
			}
			require.Len(t, got, len(want))
			for i := range want {
				require.Equal(t, want[i].Value, got[i].Value)
				require.EqualValues(t, i, got[i].Offset)
			}
		})
	}
}

func TestCompressionConfig(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	_, err := NewProducer(b, ProducerConfig{Compression: 5})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewProducer(b, ProducerConfig{Compression: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = b.CreateTopic("t", TopicConfig{Compression: TopicCompressionZstd + 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Equal(t, "zstd", CompressionZstd.String())
	require.Equal(t, "producer", TopicCompressionProducer.String())
	require.Equal(t, "uncompressed", TopicCompressionNone.String())
	require.Equal(t, "lz4", TopicCompressionLz4.String())
	// The broker's default topic config fills the compression type.
	b2, err := Open("/d2", Config{FS: vfs.NewMem(), DefaultTopic: TopicConfig{Compression: TopicCompressionSnappy}})
	require.NoError(t, err)
	defer b2.Close()
	p := createT(t, b2, "t", TopicConfig{})
	_, err = p.Append(codecRec(0, time.Now()))
	require.NoError(t, err)
	require.Equal(t, []int{batch.CompressionSnappy}, codecsOf(t, p))
}

// TestDecodeRecordsCorruptCompressed: DecodeRecords returns no record of a
// compressed batch whose payload is corrupt, and ErrCorrupt.
func TestDecodeRecordsCorruptCompressed(t *testing.T) {
	recs := []Record{codecRec(0, time.UnixMilli(1)), codecRec(1, time.UnixMilli(2))}
	for _, codec := range allCodecs[1:] {
		good := builtBatch(int(codec), recs)
		got, err := DecodeRecords(good)
		require.NoError(t, err)
		require.Len(t, got, 2)
		bad := append([]byte(nil), good...)
		bad = bad[:len(bad)-3]
		binary.BigEndian.PutUint32(bad[8:], uint32(len(bad)-12))
		batch.SetCRC(bad)
		got, err = DecodeRecords(append(append([]byte(nil), good...), bad...))
		require.Nil(t, got)
		require.True(t, errors.Is(err, ErrCorrupt), "%s: %v", codec, err)
	}
}

// TestAppendGoldenBatches: batches written by kgo and sarama (each codec, as
// segment/batch/testdata/golden holds them) are accepted by AppendBatch,
// stored as they arrived, and read back.
func TestAppendGoldenBatches(t *testing.T) {
	files, err := filepath.Glob("../segment/batch/testdata/golden/*.batch")
	require.NoError(t, err)
	require.Len(t, files, 8)
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	for i, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		sent := append([]byte(nil), raw...)
		first, next, err := p.AppendBatch(sent)
		require.NoError(t, err, f)
		require.EqualValues(t, 5*i, first)
		require.EqualValues(t, 5*i+5, next)
		stored, err := p.ReadBatches(first, 1<<20, next)
		require.NoError(t, err)
		stored = append([]byte(nil), stored[:len(raw)]...)
		batch.SetBaseOffset(stored, 0)
		// The leader stamps its epoch (bytes 12–15, outside the CRC).
		copy(stored[12:16], raw[12:16])
		require.Equal(t, raw, stored, "%s stored as it arrived", f)
		got, err := p.Read(first, 1<<20)
		require.NoError(t, err)
		require.Len(t, got, 5)
		require.Equal(t, []byte("key-0"), got[0].Key)
		require.Nil(t, got[1].Key)
		require.Nil(t, got[2].Value)
		require.Equal(t, []byte("three"), got[3].Value)
		require.Equal(t, "trace", got[0].Headers[0].Key)
		require.Equal(t, int64(1_764_000_001_500), got[4].Timestamp.UnixMilli())
	}
}

// TestProducerSplitKeepsCompression: a compressed batch the broker finds too
// large is split into batches compressed with the same codec.
func TestProducerSplitKeepsCompression(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{MaxMessageBytes: 1024})
	pr, err := NewProducer(b, ProducerConfig{Compression: CompressionLz4, Linger: time.Minute, Timeout: time.Hour})
	require.NoError(t, err)
	defer pr.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var want [][]byte
	for range 8 {
		v := make([]byte, 300) // incompressible: the batch stays too large
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		want = append(want, v)
		pr.SendAsync(Record{Topic: "t", Value: v}, func(_ Record, err error) { require.NoError(t, err) })
	}
	require.NoError(t, pr.Flush(context.Background()))
	cs := codecsOf(t, p)
	require.Greater(t, len(cs), 1, "split")
	for _, c := range cs {
		require.Equal(t, batch.CompressionLz4, c)
	}
	got, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i], got[i].Value)
	}
}

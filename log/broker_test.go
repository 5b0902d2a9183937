package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// fss runs a test over the OS file system and the in-memory one.
func fss(t *testing.T, f func(t *testing.T, fs vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { f(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { f(t, vfs.NewMem(), "/data") })
}

func openT(t *testing.T, fs vfs.FS, dir string) *Broker {
	t.Helper()
	b, err := Open(dir, Config{FS: fs})
	require.NoError(t, err)
	return b
}

func rec(i int) Record {
	return Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("value-%d", i))}
}

func TestAppendReadReopen(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		leaktest.Check(t) // the broker's loop and timing wheel end with Close
		b := openT(t, fs, dir)
		tp, err := b.CreateTopic("orders", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		require.Equal(t, 2, tp.Partitions())
		p, err := tp.Partition(1)
		require.NoError(t, err)

		ts := time.UnixMilli(1_700_000_000_123)
		off, err := p.Append(Record{Key: []byte("a"), Value: []byte("1"), Timestamp: ts,
			Headers: []Header{{Key: "h", Value: []byte("v")}, {Key: "n", Value: nil}}})
		require.NoError(t, err)
		require.EqualValues(t, 0, off)
		off, err = p.Append(Record{Value: []byte("2")}, Record{Key: []byte{}, Value: nil})
		require.NoError(t, err)
		require.EqualValues(t, 1, off)
		require.EqualValues(t, 3, p.EndOffset())
		require.EqualValues(t, 3, p.HighWatermark())
		require.EqualValues(t, 0, p.StartOffset())

		check := func(p *Partition) {
			recs, err := p.Read(0, 1<<20)
			require.NoError(t, err)
			require.Len(t, recs, 3)
			require.Equal(t, "orders", recs[0].Topic)
			require.Equal(t, 1, recs[0].Partition)
			require.True(t, recs[0].Timestamp.Equal(ts))
			require.Equal(t, []byte("a"), recs[0].Key)
			require.Equal(t, []Header{{Key: "h", Value: []byte("v")}, {Key: "n", Value: nil}}, recs[0].Headers)
			require.Nil(t, recs[1].Key)
			require.Equal(t, []byte("2"), recs[1].Value)
			require.NotNil(t, recs[2].Key)
			require.Empty(t, recs[2].Key)
			require.Nil(t, recs[2].Value)
			for i, r := range recs {
				require.EqualValues(t, i, r.Offset)
			}
			// Reading from the middle of a batch starts at that offset.
			recs, err = p.Read(2, 1)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.EqualValues(t, 2, recs[0].Offset)
			// At the end: nothing, no error.
			recs, err = p.Read(3, 1<<20)
			require.NoError(t, err)
			require.Empty(t, recs)
		}
		check(p)
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		require.Equal(t, []string{"orders"}, b.Topics())
		tp, err = b.Topic("orders")
		require.NoError(t, err)
		require.Equal(t, 2, tp.Partitions())
		p, err = tp.Partition(1)
		require.NoError(t, err)
		check(p)
		off, err = p.Append(rec(3))
		require.NoError(t, err)
		require.EqualValues(t, 3, off)
	})
}

func TestTopicConfigPersists(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		cfg := TopicConfig{Partitions: 3, SegmentBytes: 4096, RetentionTime: -1, FlushMessages: 1, Cleanup: CleanupCompactDelete}
		_, err := b.CreateTopic("t", cfg)
		require.NoError(t, err)
		require.NoError(t, b.Close())
		b = openT(t, fs, dir)
		defer b.Close()
		tp, err := b.Topic("t")
		require.NoError(t, err)
		got := tp.Config()
		require.Equal(t, cfg.WithDefaults(), got)
		require.EqualValues(t, 4096, got.SegmentBytes)
		require.Equal(t, CleanupCompactDelete, got.Cleanup)
	})
}

func TestDeleteTopic(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		leaktest.Check(t)
		b := openT(t, fs, dir)
		tp, err := b.CreateTopic("gone", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		p, _ := tp.Partition(0)
		_, err = p.Append(rec(0))
		require.NoError(t, err)
		_, err = b.CreateTopic("kept", TopicConfig{})
		require.NoError(t, err)

		require.NoError(t, b.DeleteTopic("gone"))
		require.ErrorIs(t, b.DeleteTopic("gone"), ErrUnknownTopic)
		_, err = b.Topic("gone")
		require.ErrorIs(t, err, ErrUnknownTopic)
		_, err = p.Append(rec(1))
		require.ErrorIs(t, err, ErrClosed)
		_, err = p.Read(0, 100)
		require.ErrorIs(t, err, ErrClosed)
		_, err = fs.Stat(filepath.Join(dir, "gone-0"))
		require.True(t, errors.Is(err, os.ErrNotExist), "partition dir removed: %v", err)
		require.Equal(t, []string{"kept"}, b.Topics())

		// The name can be used again, from offset 0.
		tp, err = b.CreateTopic("gone", TopicConfig{})
		require.NoError(t, err)
		p, _ = tp.Partition(0)
		require.EqualValues(t, 0, p.EndOffset())
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		require.Equal(t, []string{"gone", "kept"}, b.Topics())
	})
}

func TestBadInput(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		for _, name := range []string{"", ".", "..", "a/b", "../x", "a b", "ü", strings.Repeat("x", 250), "a\x00"} {
			_, err := b.CreateTopic(name, TopicConfig{})
			require.ErrorIs(t, err, ErrInvalidTopic, "%q", name)
			_, err = b.Topic(name)
			require.Error(t, err)
		}
		for _, name := range []string{"a", "A.b_c-9", strings.Repeat("x", 249), "...", "__internal_x"} {
			_, err := b.CreateTopic(name, TopicConfig{})
			require.NoError(t, err, "%q", name)
		}
		_, err := b.CreateTopic("a", TopicConfig{})
		require.ErrorIs(t, err, ErrTopicExists)
		_, err = b.Topic("nope")
		require.ErrorIs(t, err, ErrUnknownTopic)
		for _, cfg := range []TopicConfig{
			{Partitions: -1}, {ReplicationFactor: 2}, {SegmentBytes: -5}, {MaxIndexBytes: 8},
			{RetentionBytes: -1}, {Cleanup: 7}, {MaxMessageBytes: -1}, {FlushMessages: -1}, {FlushInterval: -time.Second},
		} {
			_, err := b.CreateTopic("cfg", cfg)
			require.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
		}
		require.NotContains(t, b.Topics(), "cfg")

		tp, err := b.CreateTopic("small", TopicConfig{MaxMessageBytes: 200})
		require.NoError(t, err)
		p, _ := tp.Partition(0)
		_, err = tp.Partition(1)
		require.ErrorIs(t, err, ErrUnknownPartition)
		_, err = p.Append(rec(0))
		require.NoError(t, err)
		_, err = p.Append(Record{Value: bytes.Repeat([]byte("x"), 300)})
		var tooLarge *RecordTooLargeError
		require.ErrorIs(t, err, ErrRecordTooLarge)
		require.ErrorAs(t, err, &tooLarge)
		require.Equal(t, 200, tooLarge.Max)
		require.EqualValues(t, 1, p.EndOffset(), "a refused batch changes nothing")

		_, err = p.Read(5, 100)
		var oor *OffsetOutOfRangeError
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		require.ErrorAs(t, err, &oor)
		require.Equal(t, OffsetOutOfRangeError{Topic: "small", Partition: 0, Requested: 5, Start: 0, End: 1}, *oor)
		_, err = p.Read(-1, 100)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)

		// A second broker on the same dir is refused.
		_, err = Open(dir, Config{FS: fs})
		require.ErrorIs(t, err, ErrDirInUse)

		require.NoError(t, b.Close())
		require.NoError(t, b.Close(), "Close twice")
		_, err = p.Append(rec(1))
		require.ErrorIs(t, err, ErrClosed)
		_, err = p.Read(0, 100)
		require.ErrorIs(t, err, ErrClosed)
		_, err = b.CreateTopic("late", TopicConfig{})
		require.ErrorIs(t, err, ErrClosed)
		_, err = b.Topic("a")
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, b.DeleteTopic("a"), ErrClosed)
		_, err = p.OffsetForTime(time.Now())
		require.ErrorIs(t, err, ErrClosed)

		// The lock is released by Close.
		b = openT(t, fs, dir)
		require.NoError(t, b.Close())
	})
}

func TestOpenFileAsDir(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		require.NoError(t, fs.MkdirAll(dir, 0o755))
		name := filepath.Join(dir, "file")
		f, err := fs.Create(name)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = Open(name, Config{FS: fs})
		require.Error(t, err)
	})
}

// TestAppendBatchRefusesBadBatches: a produced batch that is corrupt, or
// followed by extra bytes, is refused and changes nothing.
func TestAppendBatchRefusesBadBatches(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	var bd batch.Builder
	bd.Reset(1000)
	bd.Append(1000, []byte("k"), []byte("v"), nil)
	good := bd.Bytes()

	_, _, err := p.AppendBatch(append(append([]byte(nil), good...), good...))
	require.ErrorIs(t, err, ErrCorrupt, "two batches in one produce")
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	_, _, err = p.AppendBatch(bad)
	require.ErrorIs(t, err, ErrCorrupt, "bad CRC")
	require.EqualValues(t, 0, p.EndOffset())

	base, next, err := p.AppendBatch(append([]byte(nil), good...))
	require.NoError(t, err)
	require.EqualValues(t, 0, base)
	require.EqualValues(t, 1, next)
}

// TestReadAppendReusesSlice: ReadAppend appends to dst, and a reused slice
// carries nothing over from the records it held before (headers, keys).
func TestReadAppendReusesSlice(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/data")
	defer b.Close()
	tp, err := b.CreateTopic("t", TopicConfig{})
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(Record{Key: []byte("k"), Value: []byte("with headers"), Headers: []Header{{Key: "h", Value: []byte("v")}}})
	require.NoError(t, err)
	_, err = p.Append(Record{Value: []byte("plain")})
	require.NoError(t, err)

	dst := []Record{{Topic: "keep"}}
	dst, err = p.ReadAppend(dst, 0, 1)
	require.NoError(t, err)
	require.Len(t, dst, 2)
	require.Equal(t, "keep", dst[0].Topic)
	require.Equal(t, []byte("with headers"), dst[1].Value)
	require.Len(t, dst[1].Headers, 1)

	// Slot 0 of the reused slice now holds the record with headers.
	dst, err = p.ReadAppend(dst[1:1], 1, 1<<20)
	require.NoError(t, err)
	require.Len(t, dst, 1)
	require.EqualValues(t, 1, dst[0].Offset)
	require.Equal(t, []byte("plain"), dst[0].Value)
	require.Nil(t, dst[0].Key, "key carried over from the slice's previous record")
	require.Nil(t, dst[0].Headers, "headers carried over from the slice's previous record")
	require.Equal(t, "t", dst[0].Topic)

	_, err = p.ReadAppend(dst[:0], 5, 1)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

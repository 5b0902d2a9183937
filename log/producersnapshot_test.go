package log

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

// sampleProducerState has a producer with more than 5 batches (an epoch
// bump among them), one with one batch, and one across the sequence wrap.
func sampleProducerState(t *testing.T) *ProducerState {
	t.Helper()
	s := NewProducerState(1000)
	next := int64(1000)
	for i := range int32(7) {
		_, err := psAppend(s, &next, idemBatch(1, 0, i*3, 3, 5000+int64(i)))
		require.NoError(t, err)
	}
	_, err := psAppend(s, &next, idemBatch(1, 1, 0, 2, 6000))
	require.NoError(t, err)
	_, err = psAppend(s, &next, idemBatch(1, 1, 2, 1, 6001))
	require.NoError(t, err)
	_, err = psAppend(s, &next, idemBatch(42, 3, 0, 1, 7000))
	require.NoError(t, err)
	s.Update(idemBatch(9, 0, 2147483645, 5, 8000), next) // last sequence 1
	next += 5
	_, err = psAppend(s, &next, idemBatch(NoProducerID, -1, -1, 10, 0))
	require.NoError(t, err)
	return s
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/d/t-0", 0o755))
	s := sampleProducerState(t)
	name, err := WriteProducerSnapshot(fs, "/d/t-0", s)
	require.NoError(t, err)
	require.Equal(t, "/d/t-0/00000000000000001040.snapshot", name)

	got, err := ReadProducerSnapshot(fs, name)
	require.NoError(t, err)
	requireSameState(t, s, got)
	var ids []int64
	for _, p := range got.Producers() {
		ids = append(ids, p.ProducerID)
		want, _ := s.Producer(p.ProducerID)
		require.Equal(t, want, p)
	}
	require.Equal(t, []int64{1, 9, 42}, ids)

	// The snapshot keeps the duplicate window: a retry of any of the last 5
	// batches after a restart is still a duplicate.
	for _, b := range []ProducerBatch{idemBatch(1, 1, 0, 2, 0), idemBatch(9, 0, 2147483645, 5, 0), idemBatch(42, 3, 0, 1, 0)} {
		c, err := got.Check(b)
		require.NoError(t, err)
		require.True(t, c.Duplicate, "%+v", b)
	}
	_, err = got.Check(idemBatch(9, 0, 2, 1, 0))
	require.NoError(t, err)

	// Durable: a crash right after the write keeps it.
	crashed := fs.CrashClone()
	got, err = ReadProducerSnapshot(crashed, name)
	require.NoError(t, err)
	requireSameState(t, s, got)

	// Empty state.
	empty := NewProducerState(0)
	name, err = WriteProducerSnapshot(fs, "/d/t-0", empty)
	require.NoError(t, err)
	got, err = ReadProducerSnapshot(fs, name)
	require.NoError(t, err)
	require.Equal(t, empty, got)
}

// kafkaSnapshot builds a snapshot file field by field from Kafka's schema
// (PID_SNAPSHOT_MAP_SCHEMA), independently of the encoder.
func kafkaSnapshot(entries [][8]int64) []byte {
	be := binary.BigEndian
	b := be.AppendUint16(nil, 1)                 // version
	b = be.AppendUint32(b, 0)                    // crc, filled below
	b = be.AppendUint32(b, uint32(len(entries))) // array length
	for _, e := range entries {
		b = be.AppendUint64(b, uint64(e[0])) // producer_id
		b = be.AppendUint16(b, uint16(e[1])) // epoch
		b = be.AppendUint32(b, uint32(e[2])) // last_sequence
		b = be.AppendUint64(b, uint64(e[3])) // last_offset
		b = be.AppendUint32(b, uint32(e[4])) // offset_delta
		b = be.AppendUint64(b, uint64(e[5])) // timestamp
		b = be.AppendUint32(b, uint32(e[6])) // coordinator_epoch
		b = be.AppendUint64(b, uint64(e[7])) // current_txn_first_offset
	}
	be.PutUint32(b[2:], crc32.Checksum(b[6:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestProducerSnapshotKafkaLayout(t *testing.T) {
	s := NewProducerState(0)
	var next int64
	_, err := psAppend(s, &next, idemBatch(5, 2, 0, 3, 111)) // offsets 0-2
	require.NoError(t, err)
	_, err = psAppend(s, &next, idemBatch(3, 0, 0, 1, 222)) // offset 3
	require.NoError(t, err)
	_, err = psAppend(s, &next, idemBatch(5, 2, 3, 2, 333)) // offsets 4-5
	require.NoError(t, err)
	want := kafkaSnapshot([][8]int64{
		{3, 0, 0, 3, 0, 222, -1, -1},
		{5, 2, 2, 2, 2, 111, -1, -1},
		{5, 2, 4, 5, 1, 333, -1, -1},
	})
	require.Equal(t, want, encodeProducerSnapshot(s))
	require.Len(t, want, 10+3*46)

	// A file as Kafka writes it: one entry per producer, in hash order, one
	// producer with no batch (only a transaction marker was left).
	kafka := kafkaSnapshot([][8]int64{
		{77, 4, 99, 500, 9, 444, 2, -1},
		{12, 0, -1, -1, 0, 555, 1, -1},
	})
	got, err := decodeProducerSnapshot(kafka, 501)
	require.NoError(t, err)
	require.Equal(t, int64(501), got.EndOffset())
	p77, ok := got.Producer(77)
	require.True(t, ok)
	require.Equal(t, ProducerInfo{ProducerID: 77, Epoch: 4, LastSequence: 99, LastTimestamp: 444,
		Batches:               []BatchMetadata{{FirstSeq: 90, LastSeq: 99, LastOffset: 500, OffsetDelta: 9, MaxTimestamp: 444}},
		CurrentTxnFirstOffset: -1, CoordinatorEpoch: 2}, p77)
	p12, ok := got.Producer(12)
	require.True(t, ok)
	require.Equal(t, ProducerInfo{ProducerID: 12, Epoch: 0, LastSequence: -1, LastTimestamp: 555, CurrentTxnFirstOffset: -1, CoordinatorEpoch: 1}, p12)
	// Producer 12 has an epoch but no sequence: the next batch must start at 0.
	_, err = got.Check(idemBatch(12, 0, 5, 1, 0))
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	_, err = got.Check(idemBatch(12, 0, 0, 1, 0))
	require.NoError(t, err)
	// Written again, the file is Kafka's bytes (sorted by producer id), the
	// transaction fields kept.
	require.Equal(t, kafkaSnapshot([][8]int64{
		{12, 0, -1, -1, 0, 555, 1, -1},
		{77, 4, 99, 500, 9, 444, 2, -1},
	}), encodeProducerSnapshot(got))

	// Entries of a producer that are not adjacent, or of another epoch:
	// the last one read wins, as in Kafka.
	got, err = decodeProducerSnapshot(kafkaSnapshot([][8]int64{
		{1, 0, 4, 4, 4, 1, -1, -1},
		{2, 0, 0, 5, 0, 1, -1, -1},
		{1, 0, 6, 7, 1, 2, -1, -1},
		{2, 1, 1, 9, 1, 3, -1, -1},
	}), 10)
	require.NoError(t, err)
	p1, _ := got.Producer(1)
	require.Equal(t, []BatchMetadata{{FirstSeq: 5, LastSeq: 6, LastOffset: 7, OffsetDelta: 1, MaxTimestamp: 2}}, p1.Batches)
	p2, _ := got.Producer(2)
	require.Equal(t, int16(1), p2.Epoch)
	require.Equal(t, []BatchMetadata{{FirstSeq: 0, LastSeq: 1, LastOffset: 9, OffsetDelta: 1, MaxTimestamp: 3}}, p2.Batches)
}

func TestProducerSnapshotCorrupt(t *testing.T) {
	good := encodeProducerSnapshot(sampleProducerState(t))
	_, err := decodeProducerSnapshot(good, 0)
	require.NoError(t, err)

	// Every torn prefix.
	for n := range len(good) {
		_, err := decodeProducerSnapshot(good[:n], 0)
		require.ErrorIs(t, err, ErrCorruptSnapshot, "prefix of %d bytes", n)
		require.ErrorIs(t, err, ErrCorrupt)
	}
	// Every single-byte flip.
	for i := range good {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x40
		_, err := decodeProducerSnapshot(bad, 0)
		require.ErrorIs(t, err, ErrCorruptSnapshot, "byte %d flipped", i)
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"trailing bytes", append(append([]byte(nil), good...), 0)},
		{"version 2", func() []byte {
			b := kafkaSnapshot(nil)
			b[1] = 2
			return b
		}()},
		{"negative count", func() []byte {
			b := kafkaSnapshot(nil)
			binary.BigEndian.PutUint32(b[6:], 0xffffffff)
			binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crc32.MakeTable(crc32.Castagnoli)))
			return b
		}()},
		{"count beyond the bytes", func() []byte {
			b := kafkaSnapshot([][8]int64{{1, 0, 0, 0, 0, 0, -1, -1}})
			binary.BigEndian.PutUint32(b[6:], 1<<30)
			binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crc32.MakeTable(crc32.Castagnoli)))
			return b
		}()},
		{"negative producer id", kafkaSnapshot([][8]int64{{-1, 0, 0, 0, 0, 0, -1, -1}})},
		{"negative offset delta", kafkaSnapshot([][8]int64{{1, 0, 0, 5, -1, 0, -1, -1}})},
		{"first offset below 0", kafkaSnapshot([][8]int64{{1, 0, 9, 2, 5, 0, -1, -1}})},
	}
	for _, c := range cases {
		_, err := decodeProducerSnapshot(c.data, 0)
		require.ErrorIs(t, err, ErrCorruptSnapshot, c.name)
	}

	// Through the file system, and a file torn by a crash: the CRC tells.
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	name := producerSnapshotName("/d", 7)
	f, err := fs.Create(name)
	require.NoError(t, err)
	_, err = f.Write(good)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, fs.SyncDir("/d"))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		c := fs.CrashCloneWithTornWrites(rng)
		b, err := vfs.ReadFile(c, name)
		require.NoError(t, err)
		_, err = ReadProducerSnapshot(c, name)
		if len(b) == len(good) && string(b) == string(good) {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrCorruptSnapshot, "torn to %d bytes", len(b))
		}
	}
}

func TestProducerSnapshotFiles(t *testing.T) {
	fs := vfs.NewMem()
	dir := "/data/orders-3"
	require.NoError(t, fs.MkdirAll(dir, 0o755))
	for _, off := range []int64{30, 0, 10, 20} {
		_, err := WriteProducerSnapshot(fs, dir, NewProducerState(off))
		require.NoError(t, err)
	}
	for _, other := range []string{"00000000000000000010.log", "00000000000000000040.snapshot.tmp", "10.snapshot", "leader-epoch-checkpoint"} {
		require.NoError(t, vfs.WriteFileAtomic(fs, filepath.Join(dir, other), []byte("x")))
	}
	offs, err := listProducerSnapshots(fs, dir)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 10, 20, 30}, offs)

	require.NoError(t, deleteProducerSnapshotsAbove(fs, dir, 20))
	require.NoError(t, deleteProducerSnapshotsBelow(fs, dir, 10))
	offs, err = listProducerSnapshots(fs, dir)
	require.NoError(t, err)
	require.Equal(t, []int64{10, 20}, offs)
	// The deletions are durable.
	offs, err = listProducerSnapshots(fs.CrashClone(), dir)
	require.NoError(t, err)
	require.Equal(t, []int64{10, 20}, offs)
	// Nothing to delete is not an error.
	require.NoError(t, deleteProducerSnapshotsAbove(fs, dir, 100))
	_, err = fs.Stat(filepath.Join(dir, "00000000000000000010.log"))
	require.NoError(t, err)
}

func TestLoadProducerState(t *testing.T) {
	// A state at 10, and one at 20 with more in it.
	s10 := NewProducerState(0)
	var next int64
	for i := range int32(10) {
		_, err := psAppend(s10, &next, idemBatch(1, 0, i, 1, 0))
		require.NoError(t, err)
	}
	s20 := s10.Clone()
	for i := range int32(10) {
		_, err := psAppend(s20, &next, idemBatch(2, 0, i, 1, 0))
		require.NoError(t, err)
	}
	write := func(fs vfs.FS, s *ProducerState) {
		_, err := WriteProducerSnapshot(fs, "/d", s)
		require.NoError(t, err)
	}
	cases := []struct {
		name             string
		setup            func(fs vfs.FS)
		logStart, logEnd int64
		want             *ProducerState
		left             []int64
	}{
		{"no snapshot", func(vfs.FS) {}, 5, 30, NewProducerState(5), nil},
		{"the newest", func(fs vfs.FS) { write(fs, s10); write(fs, s20) }, 0, 30, s20, []int64{10, 20}},
		{"the newest at the end", func(fs vfs.FS) { write(fs, s10); write(fs, s20) }, 0, 20, s20, []int64{10, 20}},
		{"above the log end: deleted", func(fs vfs.FS) { write(fs, s10); write(fs, s20) }, 0, 15, s10, []int64{10}},
		{"corrupt: deleted, the older one used", func(fs vfs.FS) {
			write(fs, s10)
			write(fs, s20)
			require.NoError(t, vfs.WriteFileAtomic(fs, producerSnapshotName("/d", 20), []byte{0, 1, 2}))
		}, 0, 30, s10, []int64{10}},
		{"all corrupt", func(fs vfs.FS) {
			require.NoError(t, vfs.WriteFileAtomic(fs, producerSnapshotName("/d", 20), nil))
		}, 3, 30, NewProducerState(3), nil},
		{"below the log start: producers kept", func(fs vfs.FS) { write(fs, s10) }, 15, 30, func() *ProducerState {
			s := s10.Clone()
			s.endOffset = 15
			return s
		}(), []int64{10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			require.NoError(t, fs.MkdirAll("/d", 0o755))
			c.setup(fs)
			got, err := loadProducerStateDir(fs, "/d", c.logStart, c.logEnd)
			require.NoError(t, err)
			requireSameState(t, c.want, got)
			offs, err := listProducerSnapshots(fs, "/d")
			require.NoError(t, err)
			require.Equal(t, c.left, offs)
		})
	}
}

// TestProducerStateRecovery rebuilds the state as Open would after a crash:
// the newest snapshot, then a replay of the log after it, equals the state
// the writer had.
func TestProducerStateRecovery(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	live := NewProducerState(0)
	var next int64
	var batches []ProducerBatch
	seq := map[int64]int32{}
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	for i := range 200 {
		id := int64(rng.IntN(4))
		if id == 3 {
			id = NoProducerID
		}
		n := int32(1 + rng.IntN(4))
		b := idemBatch(id, 0, seq[id], n, int64(i))
		if id == NoProducerID {
			b.Epoch, b.BaseSequence = -1, -1
		}
		_, err := psAppend(live, &next, b)
		require.NoError(t, err)
		seq[id] += n
		batches = append(batches, b)
		if i%37 == 36 { // a roll
			_, err := WriteProducerSnapshot(fs, "/d", live)
			require.NoError(t, err)
		}
	}
	data := producerLog(t, 0, batches)
	got, err := loadProducerStateDir(fs, "/d", 0, next)
	require.NoError(t, err)
	require.Less(t, got.EndOffset(), next)
	// The driver reads the log from got.EndOffset(); here it replays it all
	// and the batches already reflected are skipped.
	n, err := got.ReplayBatches(data)
	require.NoError(t, err)
	require.Equal(t, len(data), n)
	requireSameState(t, live, got)
}

// FuzzProducerSnapshot: the decoder never panics, and what it accepts is
// written and read back to the same state.
func FuzzProducerSnapshot(f *testing.F) {
	f.Add(kafkaSnapshot(nil))
	f.Add(kafkaSnapshot([][8]int64{{1, 0, 4, 4, 4, 1, -1, -1}, {1, 0, 6, 7, 1, 2, -1, -1}, {2, 3, -1, -1, 0, 9, 0, -1}}))
	f.Add(kafkaSnapshot([][8]int64{{7, 1, 2147483647, 100, 3, 5, -1, -1}, {7, 1, 2, 103, 2, 6, -1, -1}}))
	f.Add([]byte{0, 1, 0, 0})
	// Open transactions (current_txn_first_offset), coordinator epochs.
	f.Add(kafkaSnapshot([][8]int64{{5, 0, 3, 10, 0, 9, 2, 8}, {6, 1, 0, 12, 0, 9, -1, 12}, {7, 0, 0, 13, 0, 9, 4, -1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeProducerSnapshot(b, 42)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptSnapshot)
			return
		}
		again, err := decodeProducerSnapshot(encodeProducerSnapshot(s), 42)
		require.NoError(t, err)
		requireSameState(t, s, again)
		require.Equal(t, encodeProducerSnapshot(s), encodeProducerSnapshot(again), "transaction fields too")
		require.Equal(t, s.OngoingTxns(), again.OngoingTxns())
	})
}

// FuzzProducerStateReplay: replaying arbitrary bytes as a log never panics
// and consumes only whole batches.
func FuzzProducerStateReplay(f *testing.F) {
	f.Add(producerLog(f, 0, []ProducerBatch{idemBatch(1, 0, 0, 2, 5), idemBatch(NoProducerID, -1, -1, 1, 6)}))
	f.Add([]byte{})
	txns, _, _ := txnLog(f) // transactional batches and markers
	f.Add(txns)
	f.Fuzz(func(t *testing.T, b []byte) {
		s := NewProducerState(0)
		n, err := s.ReplayBatches(b)
		require.True(t, n >= 0 && n <= len(b))
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
	})
}

// TestProducerSnapshotCrash crashes the machine at every file-system
// operation of a snapshot write, with torn unsynced writes: the state
// loaded afterwards is the old snapshot's or the new one's, never an error.
func TestProducerSnapshotCrash(t *testing.T) {
	old := sampleProducerState(t)
	newer := old.Clone()
	next := newer.EndOffset()
	_, err := psAppend(newer, &next, idemBatch(1, 1, 3, 4, 9000))
	require.NoError(t, err)
	const dir = "/d"
	for crashAt := 1; ; crashAt++ {
		rng := rand.New(rand.NewPCG(uint64(crashAt), 3))
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll(dir, 0o755))
		_, err := WriteProducerSnapshot(mem, dir, old)
		require.NoError(t, err)
		var ops int
		var after *vfs.MemFS
		fs := vfs.WithErrors(mem, func(vfs.Op, string) error {
			ops++
			if ops == crashAt {
				after = mem.CrashCloneWithTornWrites(rng)
			}
			if ops >= crashAt {
				return vfs.ErrInjected
			}
			return nil
		})
		_, werr := WriteProducerSnapshot(fs, dir, newer)
		done := after == nil
		if done {
			require.NoError(t, werr)
			after = mem.CrashCloneWithTornWrites(rng)
		}
		got, err := loadProducerStateDir(after, dir, 0, next)
		require.NoError(t, err, "crash at op %d", crashAt)
		if done {
			require.Equal(t, stateView(newer), stateView(got), "the write returned: the new snapshot is durable")
			return
		}
		if !assert.ObjectsAreEqual(stateView(old), stateView(got)) {
			require.Equal(t, stateView(newer), stateView(got), "crash at op %d", crashAt)
		}
	}
}

// stateView is what a ProducerState holds, for comparisons: its producers
// and its end offset (not the bookkeeping of eviction).
func stateView(s *ProducerState) any {
	return struct {
		Producers []ProducerInfo
		EndOffset int64
	}{s.Producers(), s.EndOffset()}
}

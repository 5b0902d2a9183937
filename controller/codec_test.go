package controller

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
)

func sampleRecords() []record {
	return []record{
		registerBrokerRecord{ID: 1, Epoch: 1, Addr: "127.0.0.1:9092"},
		unfenceBrokerRecord{ID: 1, Epoch: 1},
		registerBrokerRecord{ID: 2, Epoch: 2, Addr: "127.0.0.1:9093", Listeners: []Endpoint{{Name: "CLIENT", Addr: "127.0.0.1:9094"}}}, // record type 9
		unfenceBrokerRecord{ID: 2, Epoch: 2},
		topicRecord{Name: "orders", ID: tid, MinISR: 2, Unclean: true, Configs: map[string]string{"b": "2", "a": "1"}},
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 0, Replicas: []int{1, 2}, ISR: []int{1, 2}, Leader: 1}},
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 1, Replicas: []int{2, 1}, ISR: []int{2}, Leader: NoLeader, LeaderEpoch: 3, PartitionEpoch: 4}},
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 2, ISR: []int{2}, LeaderEpoch: 1, PartitionEpoch: 1},
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 2, Replicas: []int{1, 2}, ISR: []int{1}, Leader: 1, AddingReplicas: []int{2}}}, // type 21
		partitionReassignRecord{TopicID: tid, Partition: 1, Replicas: []int{2, 1}, RemovingReplicas: []int{1}, Leader: NoLeader, ISR: []int{2}, LeaderEpoch: 3, PartitionEpoch: 5},
		fenceBrokerRecord{ID: 1, Epoch: 1},
		topicRecord{Name: "gone", ID: TopicID{9}, MinISR: 1},
		removeTopicRecord{TopicID: TopicID{9}},
	}
}

func TestEntryRoundTrip(t *testing.T) {
	recs := sampleRecords()
	b := encodeEntry(nil, recs)
	got, err := decodeEntry(b)
	require.NoError(t, err)
	require.Equal(t, recs, got)
	build(t, got...) // and they apply, in order

	// A one-record partition change is compact.
	one := encodeEntry(nil, []record{partitionChangeRecord{TopicID: tid, Partition: 7, Leader: 2, ISR: []int{2, 3}, LeaderEpoch: 1, PartitionEpoch: 9}})
	require.LessOrEqual(t, len(one), 30)
}

func TestDecodeEntryRejectsCorruption(t *testing.T) {
	good := encodeEntry(nil, sampleRecords())
	cases := map[string][]byte{
		"empty":          {},
		"bad format":     append([]byte{9}, good[1:]...),
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"huge count":     {entryFormat, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"unknown type":   {entryFormat, 1, 99},
		"bad bool":       append(encodeEntry(nil, []record{topicRecord{Name: "x", ID: tid}})[:2+1+2+16+1], 7, 0),
		"broker id < -1": {entryFormat, 1, byte(typeFenceBroker), 0x05, 0x02},
	}
	for name, b := range cases {
		_, err := decodeEntry(b)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
}

func TestApplyRejectsInapplicableRecordsWithoutChange(t *testing.T) {
	base := append(liveBrokerRecords(1, 2), topicWith(false, ps([]int{1, 2}, []int{1, 2}, 1, 3, 5))...)
	bad := []record{
		registerBrokerRecord{ID: 3, Epoch: 2, Addr: "x"}, // epoch not above the last
		registerBrokerRecord{ID: 0, Epoch: 9, Addr: "x"},
		fenceBrokerRecord{ID: 1, Epoch: 2},
		unfenceBrokerRecord{ID: 7, Epoch: 1},
		topicRecord{Name: "t", ID: TopicID{5}}, // name taken
		topicRecord{Name: "u", ID: tid},        // id taken
		topicRecord{Name: "u"},                 // zero id
		partitionRecord{TopicID: TopicID{5}, State: ps([]int{1}, []int{1}, 1, 0, 0)},
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 3, Replicas: []int{1}, ISR: []int{1}, Leader: 1}},
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 1, Replicas: []int{1}, ISR: []int{2}, Leader: 2}},
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{1}, LeaderEpoch: 3, PartitionEpoch: 5}, // epoch not +1
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 2, ISR: []int{2}, LeaderEpoch: 3, PartitionEpoch: 6}, // leader changed, epoch not
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{}, LeaderEpoch: 3, PartitionEpoch: 6},  // empty isr
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{2}, LeaderEpoch: 3, PartitionEpoch: 6}, // leader outside isr
		partitionChangeRecord{TopicID: tid, Partition: 4, Leader: 1, ISR: []int{1}, LeaderEpoch: 3, PartitionEpoch: 6},
		removeTopicRecord{TopicID: TopicID{5}},
	}
	for _, r := range bad {
		img := build(t, base...)
		before := encodeSnapshot(nil, img)
		require.ErrorIs(t, img.apply(r), errInapplicable, "%#v", r)
		require.Equal(t, before, encodeSnapshot(nil, img), "%#v changed the image", r)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	img := build(t, sampleRecords()...)
	img.version = 42
	applyAll(t, img, []record{registerBrokerRecord{ID: 5, Epoch: 9, Addr: "b5"}})
	b := encodeSnapshot(nil, img)
	got, err := decodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, b, encodeSnapshot(nil, got))
	require.Equal(t, uint64(42), got.Version())
	require.Equal(t, img.Brokers(), got.Brokers())
	require.Equal(t, img.Topics(), got.Topics())
	want, _ := img.Topic("orders")
	have, _ := got.Topic("orders")
	require.Equal(t, want, have)
	// The broker epoch sequence survives: the next registration is above 9.
	recs, err := decideRegisterBroker(got, BrokerRegistration{ID: 6, Addr: "b6"})
	require.NoError(t, err)
	require.Equal(t, int64(10), recs[0].(registerBrokerRecord).Epoch)

	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		_, err := decodeSnapshot(c)
		require.ErrorIs(t, err, ErrCorrupt, "flipped byte %d", i)
	}
	_, err = decodeSnapshot(b[:len(b)-1])
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestCloneIsIndependent(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1, 2), topicWith(false, ps([]int{1, 2}, []int{1, 2}, 1, 0, 0))...)...)
	frozen := img.clone()
	before := encodeSnapshot(nil, frozen)
	applyAll(t, img, fenceBroker(img, 1))
	applyAll(t, img, []record{topicRecord{Name: "u", ID: TopicID{7}}})
	require.Equal(t, before, encodeSnapshot(nil, frozen), "change leaked into the clone")
	// and the other way round
	c2 := img.clone()
	applyAll(t, c2, unfenceBroker(c2, 1))
	b, _ := img.Broker(1)
	require.True(t, b.Fenced)
	// Accessors return copies.
	p, _ := img.Partition("t", 0)
	p.ISR[0] = 99
	p2, _ := img.Partition("t", 0)
	require.Equal(t, []int{2}, p2.ISR)
}

func TestFSMApplySnapshotRestoreWait(t *testing.T) {
	leaktest.Check(t)
	f := newFSM(discardLogger())
	require.Equal(t, uint64(0), f.image().Version())

	done := make(chan *Image)
	go func() {
		img, err := f.wait(t.Context(), 0)
		if err != nil {
			t.Error(err)
		}
		done <- img
	}()
	entry := encodeEntry(nil, sampleRecords())
	resp := f.ApplyBatch([]*raft.Log{
		{Index: 3, Type: raft.LogCommand, Data: entry},
		{Index: 4, Type: raft.LogConfiguration},
		{Index: 5, Type: raft.LogCommand, Data: []byte{1, 1, 99}},                                                // corrupt
		{Index: 6, Type: raft.LogCommand, Data: encodeEntry(nil, []record{fenceBrokerRecord{ID: 2, Epoch: 99}})}, // inapplicable
	})
	require.Nil(t, resp[0])
	require.Nil(t, resp[1])
	require.ErrorIs(t, resp[2].(error), ErrCorrupt)
	require.ErrorIs(t, resp[3].(error), errInapplicable)
	img := <-done
	require.Equal(t, uint64(6), img.Version())
	_, ok := img.Topic("orders")
	require.True(t, ok)

	snap, err := f.Snapshot()
	require.NoError(t, err)
	// Apply goes on while the snapshot persists; the snapshot keeps its state.
	f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: encodeEntry(nil, []record{removeTopicRecord{TopicID: tid}})})
	sink := &memSink{}
	require.NoError(t, snap.Persist(sink))
	snap.Release()

	g := newFSM(discardLogger())
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	require.Equal(t, encodeSnapshot(nil, img), encodeSnapshot(nil, g.image()))
	require.ErrorIs(t, g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()[:10]))), ErrCorrupt)

	f.shut()
	_, err = f.wait(t.Context(), 100)
	require.ErrorIs(t, err, ErrClosed)
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(nil, sampleRecords()))
	f.Add(encodeEntry(nil, nil))
	for _, r := range sampleRecords() {
		f.Add(encodeEntry(nil, []record{r}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeEntry(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		// Whatever decodes re-encodes to the same bytes, and applying it to
		// an image either works or is rejected cleanly.
		require.Equal(t, b, encodeEntry(nil, recs))
		img := newImage()
		for _, r := range recs {
			_ = img.apply(r)
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	img := newImage()
	for _, r := range sampleRecords() {
		_ = img.apply(r)
	}
	f.Add(encodeSnapshot(nil, img))
	f.Add(encodeSnapshot(nil, newImage()))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeSnapshot(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, b, encodeSnapshot(nil, got))
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

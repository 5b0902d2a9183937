package group_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
)

// discardStore accepts every commit and keeps nothing: the coordinator's
// own cost.
type discardStore struct{}

func (discardStore) Store(string, map[group.TopicPartition]int64) error { return nil }

// encodingStore encodes every commit as a broker does before appending it.
type encodingStore struct{ buf []byte }

func (s *encodingStore) Store(g string, offsets map[group.TopicPartition]int64) error {
	s.buf = s.buf[:0]
	for tp, off := range offsets {
		k, v := group.EncodeOffsetRecord(g, tp, off, time.Time{})
		s.buf = append(append(s.buf, k...), v...)
	}
	return nil
}

// recordBytes is the size of the __consumer_offsets records of a commit of
// n partitions of topic "orders" by group "g".
func recordBytes(n int) int64 {
	k, v := group.EncodeOffsetRecord("g", group.TopicPartition{Topic: "orders"}, 0, time.Time{})
	return int64(n * (len(k) + len(v)))
}

// BenchmarkCommitCommitted: one member commits n partitions, then reads
// them back. Bytes are those of the records the broker would append.
func BenchmarkCommitCommitted(b *testing.B) {
	for _, store := range []struct {
		name string
		s    group.OffsetStore
	}{{"discard", discardStore{}}, {"encode", &encodingStore{}}} {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("store=%s/partitions=%d", store.name, n), func(b *testing.B) {
				c, err := group.New(group.Config{Store: store.s, Partitions: func(string) (int, error) { return n, nil }})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				m, err := c.Join(ctx, group.JoinRequest{Group: "g", Topics: []string{"orders"}})
				if err != nil {
					b.Fatal(err)
				}
				offs := make(map[group.TopicPartition]int64, n)
				for _, tp := range m.Assignment {
					offs[tp] = 0
				}
				b.SetBytes(recordBytes(n))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					for tp := range offs {
						offs[tp] = int64(i)
					}
					if err := c.Commit(ctx, "g", m.MemberID, m.Generation, offs); err != nil {
						b.Fatal(err)
					}
					if got := c.Committed("g", m.Assignment); len(got) != n {
						b.Fatalf("committed %d of %d", len(got), n)
					}
				}
			})
		}
	}
}

// BenchmarkCommitParallel: members of different groups commit one
// partition each, concurrently.
func BenchmarkCommitParallel(b *testing.B) {
	c, err := group.New(group.Config{Store: discardStore{}, Partitions: func(string) (int, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var groups atomic.Int64
	b.SetBytes(recordBytes(1))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		g := fmt.Sprint("g", groups.Add(1))
		m, err := c.Join(ctx, group.JoinRequest{Group: g, Topics: []string{"orders"}})
		if err != nil {
			b.Error(err)
			return
		}
		offs := map[group.TopicPartition]int64{{Topic: "orders"}: 0}
		for i := int64(0); pb.Next(); i++ {
			offs[group.TopicPartition{Topic: "orders"}] = i
			if err := c.Commit(ctx, g, m.MemberID, m.Generation, offs); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkHeartbeat(b *testing.B) {
	c, err := group.New(group.Config{Partitions: func(string) (int, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	m, err := c.Join(ctx, group.JoinRequest{Group: "g", Topics: []string{"orders"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Heartbeat(ctx, "g", m.MemberID, m.Generation); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeOffsetRecord(b *testing.B) {
	tp := group.TopicPartition{Topic: "orders", Partition: 7}
	b.SetBytes(recordBytes(1))
	b.ReportAllocs()
	for b.Loop() {
		group.EncodeOffsetRecord("g", tp, 42, time.Time{})
	}
}

func BenchmarkDecodeOffsetRecord(b *testing.B) {
	key, value := group.EncodeOffsetRecord("g", group.TopicPartition{Topic: "orders", Partition: 7}, 42, time.Time{})
	b.SetBytes(int64(len(key) + len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := group.DecodeOffsetRecord(key, value); err != nil {
			b.Fatal(err)
		}
	}
}

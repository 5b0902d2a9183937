package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImageLookups: PartitionCount and Leader agree with Topic, and say
// false where Topic and Partition do.
func TestImageLookups(t *testing.T) {
	img := build(t, topicWith(false, ps([]int{1, 2}, []int{1, 2}, 2, 1, 1), ps([]int{2, 1}, []int{2}, NoLeader, 3, 4))...)
	info, ok := img.Topic("t")
	require.True(t, ok)
	n, ok := img.PartitionCount("t")
	require.True(t, ok)
	require.Equal(t, len(info.Partitions), n)
	for i, p := range info.Partitions {
		l, ok := img.Leader("t", i)
		require.True(t, ok)
		require.Equal(t, p.Leader, l, "partition %d", i)
	}
	_, ok = img.PartitionCount("nope")
	require.False(t, ok)
	for _, c := range []struct {
		topic string
		part  int
	}{{"t", -1}, {"t", 2}, {"nope", 0}} {
		l, ok := img.Leader(c.topic, c.part)
		require.False(t, ok, "%s-%d", c.topic, c.part)
		require.Equal(t, NoLeader, l)
	}
}

// BenchmarkImageLeader: finding a partition's leader in a topic of 1000
// partitions, through Topic (a copy of the topic) and through Leader.
func BenchmarkImageLeader(b *testing.B) {
	var parts []PartitionState
	for i := range 1000 {
		parts = append(parts, ps([]int{1, 2, 3}, []int{1, 2, 3}, 1+i%3, 1, 1))
	}
	img := newImage()
	for _, r := range topicWith(false, parts...) {
		if err := img.apply(r); err != nil {
			b.Fatal(err)
		}
	}
	for _, via := range []string{"Topic", "Leader"} {
		b.Run(fmt.Sprintf("via%s", via), func(b *testing.B) {
			b.ReportAllocs()
			sum := 0
			for i := range b.N {
				if via == "Topic" {
					t, _ := img.Topic("t")
					sum += t.Partitions[i%1000].Leader
				} else {
					l, _ := img.Leader("t", i%1000)
					sum += l
				}
			}
			if sum == 0 {
				b.Fatal("no leaders")
			}
		})
	}
}

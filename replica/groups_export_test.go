package replica

import (
	"github.com/strata-log/strata/log"
)

// StepDownOffsetsPartition makes b's replica of partition p of
// __consumer_offsets follow leader, in the next leader epoch, as the first
// part of applying an image that moves the partition's leadership does:
// the image itself is not stored and the coordinators are not synced yet.
// It returns false if b holds no replica of p.
func StepDownOffsetsPartition(b *Broker, p, leader int) bool {
	tp := log.TopicPartition{Topic: log.OffsetsTopic, Partition: p}
	ps := b.part(tp)
	img := b.img.Load()
	t, ok := img.Topic(log.OffsetsTopic)
	if ps == nil || !ok {
		return false
	}
	st, _ := img.Partition(tp.Topic, p)
	st.Leader, st.LeaderEpoch = leader, st.LeaderEpoch+1
	b.applyPartition(ps, st, t.MinInSyncReplicas, map[int]bool{})
	return true
}

package main

import (
	"flag"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionFilter is kafka-topics.sh --describe's report options: with
// one of them, describe prints only the partitions it names, without the
// topics' lines.
type partitionFilter struct {
	underReplicated, underMinISR, atMinISR, unavailable bool
}

// register adds the report flags to fs.
func (f *partitionFilter) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.underReplicated, "under-replicated-partitions", false, "describe: only partitions whose ISR is smaller than their replicas")
	fs.BoolVar(&f.underMinISR, "under-min-isr-partitions", false, "describe: only partitions whose ISR is smaller than min.insync.replicas (or that have no leader)")
	fs.BoolVar(&f.atMinISR, "at-min-isr-partitions", false, "describe: only partitions whose ISR is exactly min.insync.replicas")
	fs.BoolVar(&f.unavailable, "unavailable-partitions", false, "describe: only partitions whose leader is not a live broker")
}

// count is how many report options are set: kafka-topics.sh takes one at
// most.
func (f partitionFilter) count() int {
	n := 0
	for _, b := range []bool{f.underReplicated, f.underMinISR, f.atMinISR, f.unavailable} {
		if b {
			n++
		}
	}
	return n
}

// any reports whether a report option is set.
func (f partitionFilter) any() bool { return f.count() > 0 }

// keep reports whether describe prints a partition, as kafka-topics.sh's
// PartitionDescription decides it: leader -1 is none, live the brokers
// alive.
func (f partitionFilter) keep(leader int32, replicas, isr []int32, minISR int, live func(int32) bool) bool {
	hasLeader := leader >= 0
	switch {
	case f.underReplicated:
		return len(isr) < len(replicas)
	case f.underMinISR:
		return !hasLeader || len(isr) < minISR
	case f.atMinISR:
		return len(isr) == minISR
	case f.unavailable:
		return !hasLeader || !live(leader)
	}
	return true
}

// liveBrokers returns the brokers the cluster's metadata lists (the live
// ones).
func (a *admin) liveBrokers() (func(int32) bool, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	r, err := a.do(req, 7)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range r.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	return func(id int32) bool { return slices.Contains(ids, id) }, nil
}

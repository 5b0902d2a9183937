package log

// Producers returns the state of every producer the partition knows, by
// producer id (Kafka's DescribeProducers): epoch, last sequence and
// timestamp, the coordinator epoch of its last marker and the first offset
// of its open transaction (-1 if none). A cluster member answers
// DescribeProducers for a partition it leads, and its group coordinator
// writes a producer's transactional offsets after its last sequence, with
// it.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ps.Producers()
}

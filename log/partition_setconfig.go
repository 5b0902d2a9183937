package log

// SetConfig replaces the partition's configuration, as a Broker's
// AlterTopicConfig does for its partitions: appends (max.message.bytes,
// compression, segment rolls), retention and the cleaner see it from
// their next step; the index sizes apply to segments made after the next
// Open. For a holder of partitions that keeps topic configs elsewhere (a
// cluster member, package replica). cfg must be valid (TopicConfig.Validate).
func (p *Partition) SetConfig(cfg TopicConfig) { p.setConfig(cfg) }

package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// describeSeeds adds the seed requests of DescribeTopicPartitions,
// DescribeLogDirs, OffsetDelete and AlterConfigs (FuzzServer turns them
// hostile).
func describeSeeds(add func(kmsg.Request, ...int16)) {
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	dt.Topic = "t"
	dtp.Topics, dtp.ResponsePartitionLimit = append(dtp.Topics, dt), 1
	dtp.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "t", Partition: 1}
	add(dtp, 0)
	ld := kmsg.NewPtrDescribeLogDirsRequest()
	lt := kmsg.NewDescribeLogDirsRequestTopic()
	lt.Topic, lt.Partitions = "t", []int32{0, 1}
	ld.Topics = append(ld.Topics, lt)
	add(ld, 0, 2, 4)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = "t"
	ot.Partitions = append(ot.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: 0})
	od.Topics = append(od.Topics, ot)
	add(od, 0)
	ac := kmsg.NewPtrAlterConfigsRequest()
	for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker} {
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, "t"
		if typ == kmsg.ConfigResourceTypeBroker {
			rr.ResourceName = ""
		}
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("60000")
		if typ == kmsg.ConfigResourceTypeBroker {
			c.Name = "log.retention.ms"
		}
		rr.Configs = append(rr.Configs, c)
		ac.Resources = append(ac.Resources, rr)
	}
	add(ac, 0, 2)
}

package kafka

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LogDirDescriber describes a broker's log directories: Kafka's
// DescribeLogDirs (KIP-113). *log.Broker implements it (its data dir).
type LogDirDescriber interface {
	// DescribeLogDirs describes every log directory with the partitions
	// of tps it holds (tps nil: all of them); a partition no directory
	// holds is left out.
	DescribeLogDirs(ctx context.Context, tps []log.TopicPartition) ([]log.LogDir, error)
}

var _ LogDirDescriber = (*log.Broker)(nil)

const (
	describeLogDirsKey int16 = 35
	// codeKafkaStorageError is KAFKA_STORAGE_ERROR: a log directory is
	// offline.
	codeKafkaStorageError int16 = 56
)

// v1 is v0 answered with a throttle, v2 flexible, v3 a top-level error
// code, v4 the volume's total and usable bytes (KIP-827).
var describeLogDirsAPIs = []api{{key: describeLogDirsKey, min: 0, max: 4, handle: handleDescribeLogDirs}}

// requestedPartitions are the partitions a request's topics name: nil
// for null topics (every partition), an empty list for none (DescribeLogDirs,
// ListPartitionReassignments).
func requestedPartitions[T any](topics []T, of func(T) (string, []int32)) []log.TopicPartition {
	if topics == nil {
		return nil
	}
	tps := []log.TopicPartition{}
	for _, t := range topics {
		name, parts := of(t)
		for _, p := range parts {
			tps = append(tps, log.TopicPartition{Topic: name, Partition: int(p)})
		}
	}
	return tps
}

// handleDescribeLogDirs describes the log directories: null topics is
// every partition, an empty list none.
func handleDescribeLogDirs(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	tps := requestedPartitions(req.Topics, func(t kmsg.DescribeLogDirsRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
	dirs, err := c.s.caps.logDirs.DescribeLogDirs(ctx, tps)
	if err != nil {
		// Before v3 there is no code to say it with: no directory.
		resp.ErrorCode = errorCode(err)
		return reply{resp: resp}
	}
	for _, d := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Dir
		if d.Err != nil {
			rd.ErrorCode = codeKafkaStorageError
		}
		rd.TotalBytes, rd.UsableBytes = d.TotalBytes, d.UsableBytes
		for _, p := range d.Partitions {
			if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != p.Topic {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = p.Topic
				rd.Topics = append(rd.Topics, rt)
			}
			rt := &rd.Topics[len(rd.Topics)-1]
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = int32(p.Partition), p.Size, p.OffsetLag, p.IsFuture
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return reply{resp: resp}
}

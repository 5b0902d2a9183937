package replica

import (
	"context"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

var _ kafka.LogDirDescriber = kafkaBackend{}

// DescribeLogDirs describes the member's one log directory, its store's
// (kafka.LogDirDescriber: Kafka's DescribeLogDirs): the replicas of tps
// it holds (nil: all), leader's and follower's alike, as a Kafka broker
// lists every log it has.
func (k kafkaBackend) DescribeLogDirs(ctx context.Context, tps []log.TopicPartition) ([]log.LogDir, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []log.LogDir{k.store.DescribeLogDir(tps)}, nil
}

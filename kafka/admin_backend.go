package kafka

import (
	"context"

	"github.com/strata-log/strata/log"
)

// The administrative APIs a Backend may serve beyond Backend: each is an
// optional interface, and the server advertises (ApiVersions) and serves
// an API only when its backend implements it. *log.Broker implements all
// of them; a cluster member's adapter (replica) those its controller supports.

// PartitionCreator grows topics: Kafka's CreatePartitions.
type PartitionCreator interface {
	// CreatePartitions grows topic to count partitions in all (log's
	// ErrInvalidPartitions for a count not above the current one,
	// ErrUnknownTopic).
	CreatePartitions(ctx context.Context, topic string, count int) error
}

// TopicConfigAlterer changes the configuration of existing topics:
// Kafka's IncrementalAlterConfigs, and DescribeConfigs' config sources.
type TopicConfigAlterer interface {
	// TopicOverrides returns the configuration set on the topic itself:
	// its non-zero fields are described as DYNAMIC_TOPIC_CONFIG, the
	// others as defaults.
	TopicOverrides(topic string) (log.TopicConfig, error)
	// AlterTopicConfig replaces the configuration set on the topic (zero
	// fields: back to the default), applied to its partitions at once and
	// durably (log.ErrInvalidConfig, log.ErrUnknownTopic).
	AlterTopicConfig(topic string, overrides log.TopicConfig) error
	// ValidateTopicConfig reports what AlterTopicConfig would, changing
	// nothing (validate_only).
	ValidateTopicConfig(topic string, overrides log.TopicConfig) error
}

// RecordsDeleter moves partitions' log start offsets: Kafka's
// DeleteRecords.
type RecordsDeleter interface {
	// DeleteRecords makes the records of tp below offset (-1: the high
	// watermark) unreadable and returns the new log start offset, the low
	// watermark (log.ErrOffsetOutOfRange past the high watermark).
	DeleteRecords(ctx context.Context, tp log.TopicPartition, offset int64) (lowWatermark int64, err error)
}

// EpochEndOffsetter answers OffsetForLeaderEpoch from the partitions'
// leader-epoch caches, for a Backend that is not a ReplicaBackend (which
// answers it whole).
type EpochEndOffsetter interface {
	// EndOffsetForEpoch returns the largest epoch at or below epoch that
	// tp knows and the offset where it ended (log.Partition.EndOffsetForEpoch).
	EndOffsetForEpoch(tp log.TopicPartition, epoch int32) (leaderEpoch int32, endOffset int64, err error)
}

var (
	_ PartitionCreator   = (*log.Broker)(nil)
	_ TopicConfigAlterer = (*log.Broker)(nil)
	_ RecordsDeleter     = (*log.Broker)(nil)
	_ EpochEndOffsetter  = (*log.Broker)(nil)
)

// API keys of the administrative APIs.
const (
	deleteRecordsKey           int16 = 21
	createPartitionsKey        int16 = 37
	incrementalAlterConfigsKey int16 = 44
)

// Their tables, one per optional interface.
var (
	createPartitionsAPIs = []api{{key: createPartitionsKey, min: 0, max: 3, handle: handleCreatePartitions}}
	alterConfigsAPIs     = []api{{key: incrementalAlterConfigsKey, min: 0, max: 1, handle: handleIncrementalAlterConfigs}}
	deleteRecordsAPIs    = []api{{key: deleteRecordsKey, min: 0, max: 2, handle: handleDeleteRecords}}
	// v2 brings the current leader epoch (KIP-320), v3 the replica id,
	// v4 is flexible.
	epochAPIs = []api{{key: offsetForLeaderEpochKey, min: 0, max: 4, handle: handleStandaloneOffsetForLeaderEpoch}}
)

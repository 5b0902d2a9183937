package log

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/strata-log/strata/tp"
)

// LogDir is one log directory of a broker, as Kafka's DescribeLogDirs
// describes it (KIP-113): its path, the volume it is on and the
// partitions it holds.
type LogDir struct {
	// Dir is the directory's absolute path.
	Dir string
	// Err is why the directory is offline (Kafka's KAFKA_STORAGE_ERROR);
	// nil when it serves.
	Err error
	// TotalBytes and UsableBytes are the size of the directory's volume
	// and what of it is free for the broker (KIP-827); -1 when unknown.
	TotalBytes, UsableBytes int64
	// Partitions are those asked for that the directory holds, by topic
	// then partition.
	Partitions []LogDirPartition
}

// LogDirPartition is one partition of a LogDir.
type LogDirPartition struct {
	TopicPartition
	// Size is the bytes of its segments.
	Size int64
	// OffsetLag is how far its log end is behind its high watermark (0
	// for a leader and for a follower that is caught up to what it knows,
	// as Kafka computes it for a current replica).
	OffsetLag int64
	// IsFuture marks a replica being moved to this directory (Kafka's
	// AlterReplicaLogDirs): Strata has one directory, so never.
	IsFuture bool
}

// DescribeLogDirs describes the broker's one log directory, its data dir:
// the partitions of tps it holds (tps nil: every partition, the internal
// OffsetsTopic's too, as Kafka lists every log), and its volume's size.
// Partitions it does not hold are left out, as Kafka leaves them.
func (b *Broker) DescribeLogDirs(ctx context.Context, tps []TopicPartition) ([]LogDir, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b.isClosed() {
		return nil, ErrClosed
	}
	return []LogDir{b.store.DescribeLogDir(tps)}, nil
}

// DescribeLogDir describes the store's directory with the open partitions
// of tps (nil: all of them), sorted by topic and partition, each once.
func (s *Store) DescribeLogDir(tps []TopicPartition) LogDir {
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		dir = s.dir
	}
	ld := LogDir{Dir: dir, Partitions: []LogDirPartition{}}
	ld.TotalBytes, ld.UsableBytes = volumeBytes(s.dir)
	describe := func(p *Partition) {
		ld.Partitions = append(ld.Partitions, LogDirPartition{
			TopicPartition: TopicPartition{Topic: p.topic, Partition: p.id},
			Size:           p.Size(),
			OffsetLag:      max(p.HighWatermark()-p.EndOffset(), 0),
		})
	}
	if tps == nil {
		for _, p := range s.Partitions() {
			describe(p)
		}
		return ld
	}
	tps = slices.Clone(tps)
	slices.SortFunc(tps, tp.Compare)
	for _, t := range slices.Compact(tps) {
		if p, ok := s.Partition(t.Topic, t.Partition); ok {
			describe(p)
		}
	}
	return ld
}

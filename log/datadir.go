package log

import "github.com/strata-log/strata/vfs"

// Names of a data dir's own files (see the package doc), for tools that
// read a data dir offline, such as strata verify.
const (
	// TopicsFile lists the topics and their configurations.
	TopicsFile = topicsFile
	// LockFile is held by the process that has the data dir open.
	LockFile = lockFile
	// RecoveryPointCheckpointFile, LogStartCheckpointFile and
	// HighWatermarkCheckpointFile are checkpoints in Kafka's text format.
	RecoveryPointCheckpointFile = recoveryPointFile
	LogStartCheckpointFile      = logStartFile
	HighWatermarkCheckpointFile = highWatermarkFile
)

// ReadCheckpoint reads a checkpoint file of a data dir (one of the
// *CheckpointFile names) the way Open reads it: a missing file is empty,
// a torn or malformed one is an error.
func ReadCheckpoint(path string) (map[TopicPartition]int64, error) {
	return readCheckpoint(vfs.Default, path)
}

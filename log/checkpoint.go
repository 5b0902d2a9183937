package log

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/vfs"
)

// Checkpoint files in the data dir, in Kafka's text format:
//
//	0                 version
//	2                 number of entries
//	orders 0 1042     topic partition offset
//	orders 1 977
const (
	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
	// highWatermarkFile holds the high watermarks (Kafka's name).
	highWatermarkFile = "replication-offset-checkpoint"
	checkpointVersion = 0
)

// formatCheckpoint renders offsets in the checkpoint format, sorted.
func formatCheckpoint(offsets map[TopicPartition]int64) []byte {
	tps := make([]TopicPartition, 0, len(offsets))
	n := 8
	for tp := range offsets {
		tps = append(tps, tp)
		n += len(tp.Topic) + 32
	}
	slices.SortFunc(tps, tp.Compare)
	buf := make([]byte, 0, n)
	buf = strconv.AppendInt(buf, checkpointVersion, 10)
	buf = append(buf, '\n')
	buf = strconv.AppendInt(buf, int64(len(tps)), 10)
	buf = append(buf, '\n')
	for _, tp := range tps {
		buf = append(buf, tp.Topic...)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(tp.Partition), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, offsets[tp], 10)
		buf = append(buf, '\n')
	}
	return buf
}

// writeCheckpoint replaces name with data atomically (temp file, fsync,
// rename, directory fsync).
func writeCheckpoint(fs vfs.FS, name string, data []byte) error {
	if err := vfs.WriteFileAtomic(fs, name, data); err != nil {
		return fmt.Errorf("log: write checkpoint %s: %w", name, err)
	}
	return nil
}

// readCheckpoint reads a checkpoint file; a missing file is an empty one.
func readCheckpoint(fs vfs.FS, name string) (map[TopicPartition]int64, error) {
	data, err := vfs.ReadFile(fs, name)
	if isNotExist(err) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log: read checkpoint %s: %w", name, err)
	}
	bad := func(why string) error { return fmt.Errorf("log: checkpoint %s: %s", name, why) }
	if len(data) == 0 || data[len(data)-1] != '\n' {
		// Every line ends with one: the file was cut.
		return nil, bad("torn: no final newline")
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != strconv.Itoa(checkpointVersion) {
		return nil, bad(fmt.Sprintf("unknown version %q (want %d)", strings.TrimSpace(lines[0]), checkpointVersion))
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, bad(fmt.Sprintf("entry count %q, %d entries follow", strings.TrimSpace(lines[1]), len(lines)-2))
	}
	out := make(map[TopicPartition]int64, n)
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, bad("malformed line " + strconv.Quote(line))
		}
		part, err1 := strconv.Atoi(f[1])
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || part < 0 || off < 0 {
			return nil, bad("malformed line " + strconv.Quote(line))
		}
		out[TopicPartition{Topic: f[0], Partition: part}] = off
	}
	return out, nil
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-log/strata/log"
)

// The data dir's files besides the partitions (see package log's doc).
const (
	topicsFile        = log.TopicsFile
	recoveryPointFile = log.RecoveryPointCheckpointFile
	logStartFile      = log.LogStartCheckpointFile
)

// dirMeta is what the data dir's own files say about its partitions.
type dirMeta struct {
	recoveryPoint map[string]int64 // by partition dir name
	logStart      map[string]int64
	partitions    map[string]int // by topic; nil when topics.json was not understood
}

// readCheckpoint reads a checkpoint file with the broker's own parser,
// keyed by the partition's directory name.
func readCheckpoint(path string) (map[string]int64, error) {
	ck, err := log.ReadCheckpoint(path)
	if err != nil {
		// The report names the file already.
		msg := strings.TrimPrefix(err.Error(), "log: checkpoint "+path+": ")
		return nil, fmt.Errorf("%s: the broker cannot open the data dir", msg)
	}
	out := make(map[string]int64, len(ck))
	for tp, off := range ck {
		out[fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)] = off
	}
	return out, nil
}

// readMeta reads the checkpoints and topics.json, reporting what is wrong
// with them. A topics.json this command does not understand (a newer
// version) is noted on stderr and not checked.
func (v *verifier) readMeta() *dirMeta {
	m := &dirMeta{}
	for _, c := range []struct {
		name string
		dst  *map[string]int64
	}{{recoveryPointFile, &m.recoveryPoint}, {logStartFile, &m.logStart}} {
		r := &reporter{v: v, file: filepath.Join(v.dir, c.name)}
		ck, err := readCheckpoint(r.file)
		if err != nil {
			r.report("%v", err)
			ck = map[string]int64{}
		}
		*c.dst = ck
	}
	r := &reporter{v: v, file: filepath.Join(v.dir, topicsFile)}
	data, err := os.ReadFile(r.file)
	if errors.Is(err, fs.ErrNotExist) {
		r.report("missing: the broker would open no topics, and ignore every partition directory")
		return m
	}
	if err != nil {
		r.report("%v", err)
		return m
	}
	var meta struct {
		Version int `json:"version"`
		Topics  map[string]struct {
			Partitions int
		} `json:"topics"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		r.report("not valid JSON: %v", err)
		return m
	}
	if meta.Version != 1 {
		v.note("%s: version %d is not one this strata knows: topics and partitions not checked against it", r.file, meta.Version)
		return m
	}
	m.partitions = map[string]int{}
	for name, t := range meta.Topics {
		m.partitions[name] = t.Partitions
	}
	return m
}

// checkTopics reports the partitions topics.json names that have no
// directory, and the directories of no partition it names.
func (v *verifier) checkTopics(m *dirMeta, dirs []string) {
	if m.partitions == nil {
		return
	}
	have := map[string]bool{}
	for _, d := range dirs {
		have[d] = true
		i := strings.LastIndexByte(d, '-')
		topic, part := d[:i], d[i+1:]
		n, known := m.partitions[topic]
		p, _ := strconv.Atoi(part)
		if topic != log.OffsetsTopic && (!known || p >= n) {
			r := &reporter{v: v, file: filepath.Join(v.dir, d)}
			r.report("not a partition of any topic in %s: the broker ignores it", topicsFile)
		}
	}
	topics := make([]string, 0, len(m.partitions))
	for topic := range m.partitions {
		topics = append(topics, topic)
	}
	sort.Strings(topics)
	for _, topic := range topics {
		for p := range m.partitions[topic] {
			if d := fmt.Sprintf("%s-%d", topic, p); !have[d] {
				r := &reporter{v: v, file: filepath.Join(v.dir, d)}
				r.report("missing: %s names partition %d of topic %s (the broker would start it empty)", topicsFile, p, topic)
			}
		}
	}
}

// checkCheckpoints compares a partition's segments, [first, end), with
// what the checkpoints say.
func (v *verifier) checkCheckpoints(m *dirMeta, name string, first, end int64) {
	r := &reporter{v: v, file: filepath.Join(v.dir, name)}
	if start, ok := m.logStart[name]; ok && start < first {
		r.report("%s says the log starts at offset %d, the first segment starts at %d: offsets %d..%d are missing", logStartFile, start, first, start, first-1)
	}
	if rp, ok := m.recoveryPoint[name]; ok && rp > end {
		r.report("%s says offsets below %d were fsynced, the log ends at %d: fsynced records are missing", recoveryPointFile, rp, end)
	}
}

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
	topicsFile        = "topics.json"
	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
)

// dirMeta is what the data dir's own files say about its partitions.
type dirMeta struct {
	recoveryPoint map[string]int64 // by partition dir name
	logStart      map[string]int64
	partitions    map[string]int // by topic; nil when topics.json was not understood
}

// readCheckpoint parses a checkpoint file in Kafka's text format (version
// 0, the entry count, then "topic partition offset" lines), keyed by the
// partition's directory name. A missing file is an empty one. The log
// package's parser is not exported; this is the same format.
func readCheckpoint(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("unknown version %q (want 0): the broker cannot open the data dir", lines[0])
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("entry count %q, %d entries follow: the broker cannot open the data dir", lines[1], len(lines)-2)
	}
	out := make(map[string]int64, n)
	for i, line := range lines[2:] {
		f := strings.Fields(line)
		var part int
		var off int64
		if len(f) == 3 {
			part, err = strconv.Atoi(f[1])
			if err == nil {
				off, err = strconv.ParseInt(f[2], 10, 64)
			}
		}
		if len(f) != 3 || err != nil || part < 0 || off < 0 {
			return nil, fmt.Errorf("line %d %q is not \"topic partition offset\": the broker cannot open the data dir", i+3, line)
		}
		out[fmt.Sprintf("%s-%d", f[0], part)] = off
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

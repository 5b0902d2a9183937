package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

const (
	seg0 = "testdata/data/events-0/00000000000000000000"
	seg1 = "testdata/data/events-0/00000000000000000012"
)

func TestDumpGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dump_log", []string{"dump", seg0 + ".log", seg1 + ".log"}},
		{"dump_log_data", []string{"dump", "--print-data-log", seg0 + ".log"}},
		{"dump_log_deep", []string{"dump", seg0 + ".log", "--deep-iteration"}},
		{"dump_crafted", []string{"dump", "--print-data-log", "testdata/segments/crafted/00000000000000000000.log"}},
		{"dump_indexes", []string{"dump", "--files", seg0 + ".index," + seg0 + ".timeindex", seg1 + ".index", seg1 + ".timeindex"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, ok(t, "", "", tc.args...))
		})
	}
}

// damaged copies segment 0 of events-0 into a temp dir, lets damage change
// its files, and returns the dir.
func damaged(t *testing.T, damage func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		data, err := os.ReadFile(seg0 + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000"+ext), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	damage(dir)
	return dir
}

// patch overwrites bytes of a file at off.
func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipValueByte changes one byte of the first record value of the second
// batch of segment 0 (at byte 181): its CRC no longer matches.
func flipValueByte(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "00000000000000000000.log")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("value 4 of partition 0"))
	if i < 181 {
		t.Fatalf("record value not found in the second batch (at %d)", i)
	}
	patch(t, path, int64(i), []byte("V"))
}

// gzipFlagged is a batch whose attributes say gzip over records that are
// not gzip (its CRC is right): a compressed batch that does not decompress.
const gzipFlagged = "testdata/segments/gzipflag/00000000000000000000.log"

// goldenBatches are real client batches, one per codec, from kgo and
// sarama (package batch's test data).
var goldenBatches = []string{
	"kgo-gzip", "kgo-lz4", "kgo-snappy", "kgo-zstd",
	"sarama-gzip", "sarama-lz4", "sarama-snappy", "sarama-zstd",
}

// compressedSegment writes, in a new data dir, topic "zipped" with one
// segment made of the golden client batches at consecutive offsets, as a
// broker stores them (offsets assigned, bytes otherwise as sent), and
// returns the dir and the partition dir.
func compressedSegment(t *testing.T) (dir, part string) {
	t.Helper()
	dir = t.TempDir()
	part = filepath.Join(dir, "zipped-0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	var file []byte
	next := int64(0)
	for _, name := range goldenBatches {
		raw, err := os.ReadFile(filepath.Join("..", "..", "segment", "batch", "testdata", "golden", name+".batch"))
		if err != nil {
			t.Fatal(err)
		}
		batch.SetBaseOffset(raw, next)
		h, err := batch.ParseHeader(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		next = h.NextOffset()
		file = append(file, raw...)
	}
	if err := os.WriteFile(filepath.Join(part, "00000000000000000000.log"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".index", ".timeindex"} {
		if err := os.WriteFile(filepath.Join(part, "00000000000000000000"+ext), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "topics.json"), []byte(`{"version": 1, "topics": {"zipped": {"Partitions": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, part
}

// dump shows each batch's codec and decodes its records, for every codec
// and both clients' framings.
func TestDumpCompressed(t *testing.T) {
	_, part := compressedSegment(t)
	out := ok(t, part, "", "dump", "--print-data-log", "00000000000000000000.log")
	golden(t, "dump_compressed", out)
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		if n := strings.Count(out, "compresscodec: "+codec+" "); n != 2 {
			t.Errorf("%d batches with compresscodec: %s, want 2 (kgo's and sarama's)", n, codec)
		}
	}
	if strings.Contains(out, "isvalid: false") || !strings.Contains(out, "| offset: 0 ") || !strings.Contains(out, "payload: ") {
		t.Errorf("records not decoded:\n%s", out)
	}
}

// A batch flagged gzip whose payload is not gzip fails its checks though
// its CRC is right: reported, exit 1.
func TestDumpCompressedCorrupt(t *testing.T) {
	r := strata(t, "", "", "dump", "--deep-iteration", gzipFlagged)
	if r.code != exitProblem || !strings.Contains(r.stdout, "compresscodec: gzip") || !strings.Contains(r.stdout, "isvalid: false") {
		t.Errorf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
	// A flipped byte of a real compressed payload: a CRC mismatch.
	_, part := compressedSegment(t)
	patch(t, filepath.Join(part, "00000000000000000000.log"), 100, []byte{0xff})
	r = strata(t, part, "", "dump", "00000000000000000000.log")
	if r.code != exitProblem || !strings.Contains(r.stdout, "(computed ") || strings.Count(r.stdout, "isvalid: true") != len(goldenBatches)-1 {
		t.Errorf("flipped byte: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

// dump of a producer state snapshot: every producer and its batches; a
// damaged one is a problem.
func TestDumpSnapshot(t *testing.T) {
	dir := t.TempDir()
	st := log.NewProducerState(0)
	st.Update(log.ProducerBatch{ProducerID: 4242, Epoch: 7, BaseSequence: 0, LastOffsetDelta: 2, MaxTimestamp: 1_700_000_000_002}, 0)
	st.Update(log.ProducerBatch{ProducerID: 4243, Epoch: 0, BaseSequence: 0, LastOffsetDelta: 0, MaxTimestamp: 1_700_000_000_010}, 3)
	st.Update(log.ProducerBatch{ProducerID: 4242, Epoch: 7, BaseSequence: 3, LastOffsetDelta: 1, MaxTimestamp: 1_700_000_000_020}, 4)
	name, err := log.WriteProducerSnapshot(vfs.Default, dir, st)
	if err != nil {
		t.Fatal(err)
	}
	out := ok(t, dir, "", "dump", filepath.Base(name))
	golden(t, "dump_snapshot", out)

	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	bad := filepath.Join(dir, "00000000000000000009.snapshot")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := strata(t, dir, "", "dump", filepath.Base(bad))
	if r.code != exitProblem || !strings.Contains(r.stdout, "corrupt producer snapshot") {
		t.Errorf("damaged snapshot: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := strata(t, dir, "", "dump", "00000000000000000077.snapshot"); r.code != exitProblem || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing snapshot: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestDumpCorruptCRC(t *testing.T) {
	dir := damaged(t, func(dir string) { flipValueByte(t, dir) })
	r := strata(t, dir, "", "dump", "--print-data-log", "00000000000000000000.log")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	if !strings.Contains(r.stderr, "1 problem(s) found") {
		t.Errorf("stderr %q does not count the problem", r.stderr)
	}
	golden(t, "dump_corrupt_crc", r.stdout)
}

func TestDumpTornTail(t *testing.T) {
	dir := damaged(t, func(dir string) {
		if err := os.Truncate(filepath.Join(dir, "00000000000000000000.log"), 400); err != nil {
			t.Fatal(err)
		}
	})
	r := strata(t, dir, "", "dump", "00000000000000000000.log", "00000000000000000000.index")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	golden(t, "dump_torn_tail", r.stdout)
}

func TestDumpBadIndexes(t *testing.T) {
	dir := damaged(t, func(dir string) {
		// offset index entry 0: offset 5 at position 100, not a batch start
		patch(t, filepath.Join(dir, "00000000000000000000.index"), 0, []byte{0, 0, 0, 5, 0, 0, 0, 100})
		// time index entry 2: offset 10, not the last offset of a batch;
		// and one trailing byte, not a whole entry
		patch(t, filepath.Join(dir, "00000000000000000000.timeindex"), 32, []byte{0, 0, 0, 10, 7})
	})
	r := strata(t, dir, "", "dump", "00000000000000000000.index", "00000000000000000000.timeindex")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	golden(t, "dump_bad_indexes", r.stdout)

	// Out of order: the two entries of the offset index swapped.
	dir = damaged(t, func(dir string) {
		patch(t, filepath.Join(dir, "00000000000000000000.index"), 0, []byte{0, 0, 0, 8, 0, 0, 1, 63, 0, 0, 0, 5, 0, 0, 0, 181})
	})
	r = strata(t, dir, "", "dump", "--verify-index-only", "00000000000000000000.index")
	if r.code != exitProblem || !strings.Contains(r.stdout, "entry 1 (offset 5, position 181): offset not above the previous entry's 8") {
		t.Errorf("swapped entries: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	if strings.Contains(r.stdout, "offset: 8 position: 319\n") {
		t.Errorf("--verify-index-only printed the entries:\n%s", r.stdout)
	}
}

func TestDumpBadInput(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "00000000000000000012.snapshot")
	if err := os.WriteFile(snap, []byte("snapshot bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := strata(t, "", "", "dump", snap)
	if r.code != exitProblem || !strings.Contains(r.stdout, "corrupt producer snapshot") {
		t.Errorf("a .snapshot of other bytes: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"dump"}, exitUsage, "no files given"},
		{[]string{"dump", "notes.txt"}, exitProblem, "not a .log, .index, .timeindex, .txnindex or .snapshot file"},
		{[]string{"dump", filepath.Join(dir, "00000000000000000000.log")}, exitProblem, "no such file or directory"},
		{[]string{"dump", filepath.Join(dir, "segment.log")}, exitProblem, "not a segment file name"},
	} {
		r := strata(t, "", "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("strata %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
}

func TestDumpIndexWithoutLog(t *testing.T) {
	dir := damaged(t, func(dir string) { os.Remove(filepath.Join(dir, "00000000000000000000.log")) })
	out := ok(t, dir, "", "dump", "00000000000000000000.index")
	if !strings.Contains(out, "00000000000000000000.log not found: entries not checked against the log") {
		t.Errorf("stdout:\n%s", out)
	}
}

// The base offset is outside the CRC: a batch renumbered on disk still
// checks out by itself, and only the offsets give it away.
func TestDumpOffsetsOutOfSequence(t *testing.T) {
	dir := damaged(t, func(dir string) {
		patch(t, filepath.Join(dir, "00000000000000000000.log"), 319, []byte{0, 0, 0, 0, 0, 0, 0, 100})
	})
	r := strata(t, dir, "", "dump", "00000000000000000000.log", "00000000000000000000.index")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	for _, want := range []string{
		"problem: batch at byte 319 starts at offset 100, the one before it ends at 5: offsets 6..99 are missing\n",
		"problem: batch at byte 478 starts at offset 9, not after the one before it, which ends at 102\n",
		"problem: entry 1 (offset 8, position 319): the batch there holds offsets 100..102\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "isvalid: false") {
		t.Errorf("a batch failed its own checks:\n%s", r.stdout)
	}
}

func TestDumpMaxBytes(t *testing.T) {
	// Batches at 0 (181 bytes), 181 (138), 319 (159), 478 (181).
	out := ok(t, "", "", "dump", "--max-bytes", "400", seg0+".log")
	if n := strings.Count(out, "baseOffset: "); n != 2 || !strings.Contains(out, "position: 181 ") {
		t.Errorf("--max-bytes 400 dumped %d batches:\n%s", n, out)
	}
}

// An index file too large to be one is refused before it is read.
func TestDumpHugeIndex(t *testing.T) {
	dir := damaged(t, func(dir string) {
		if err := os.Truncate(filepath.Join(dir, "00000000000000000000.index"), 3<<30); err != nil { // sparse
			t.Fatal(err)
		}
	})
	r := strata(t, dir, "", "dump", "00000000000000000000.index")
	if r.code != exitProblem || !strings.Contains(r.stderr, "more than an index can be") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

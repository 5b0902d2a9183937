package main

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

const dumpHelp = `
Prints what segment files hold, as kafka-dump-log.sh does:

  .log        every batch: base and last offset, record count, position, size,
              CRC and whether the batch checks out, magic, attributes
              (compression codec, timestamp type, transactional, control),
              producer id, epoch and base sequence, partition leader epoch and
              max timestamp; with --deep-iteration each record's offset,
              timestamp and sizes, with --print-data-log also its key, value
              and headers.
  .index      the offset index entries (offset, position), checked against the
  .timeindex  .log next to them; the time index entries (timestamp, offset) too.
  .txnindex   the aborted transactions (producer id, first offset, last offset:
              its ABORT marker, last stable offset), each checked against an
              ABORT marker of its producer at its last offset in the .log.
  .snapshot   producer state snapshots: each idempotent producer's id, epoch,
              last sequence and timestamp, and the batches kept of it (first
              and last sequence and offset, max timestamp).

A batch that fails its checks (a CRC mismatch, a damaged header or record) is
reported and the exit code is 1; so is an index entry that disagrees with the
log, and a compressed batch whose records decompress past
--max-decompressed-bytes (a decompression bomb: decompression stops there; its
records are not printed). Files are only read, never changed.`

type dumpOpts struct {
	deep      bool  // a line per record
	data      bool  // and its key, value and headers
	indexOnly bool  // index files: only the problems
	maxBytes  int64 // .log files: stop after the batch that reaches it; 0: no limit
	// maxInflate bounds a compressed batch's records decompressed for
	// --deep-iteration (batch.DecompressLimit).
	maxInflate int
}

func runDump(e *env, args []string) error {
	fs := newFlags(e, "dump", "[flags] FILE...", dumpHelp)
	var o dumpOpts
	var files string
	fs.BoolVar(&o.data, "print-data-log", false, "print each record's key, value and headers (implies --deep-iteration)")
	fs.BoolVar(&o.deep, "deep-iteration", false, "print a line per record, not only per batch")
	fs.BoolVar(&o.indexOnly, "verify-index-only", false, "for index files, print only the entries that disagree with the log")
	fs.Int64Var(&o.maxBytes, "max-bytes", 0, "`B`: read batches of a .log only up to B bytes into the file (0: all)")
	fs.IntVar(&o.maxInflate, "max-decompressed-bytes", batch.DefaultMaxDecompressed, "`B`: with --deep-iteration, decompress a batch's records up to B bytes (at most 1 GiB); a batch past it is a problem")
	fs.StringVar(&files, "files", "", "`FILES`: comma-separated files to dump (Kafka's flag; or give them as arguments)")
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if files != "" {
		paths = append(strings.Split(files, ","), paths...)
	}
	if len(paths) == 0 {
		return usagef("no files given")
	}
	o.deep = o.deep || o.data
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	problems := 0
	for _, path := range paths {
		n, err := dumpFile(w, path, o)
		problems += n
		if err != nil {
			w.Flush()
			fmt.Fprintf(e.stderr, "strata dump: %v\n", err)
			problems++
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if problems > 0 {
		fmt.Fprintf(e.stderr, "strata dump: %d problem(s) found\n", problems)
		return errProblems
	}
	return nil
}

// dumpFile dumps one file and returns the number of problems it printed.
func dumpFile(w *bufio.Writer, path string, o dumpOpts) (int, error) {
	switch filepath.Ext(path) {
	case ".log":
		return dumpLog(w, path, o)
	case ".index":
		return dumpIndex(w, path, false, o)
	case ".timeindex":
		return dumpIndex(w, path, true, o)
	case ".txnindex":
		return dumpTxnIndex(w, path)
	case ".snapshot":
		return dumpSnapshot(w, path)
	default:
		return 0, fmt.Errorf("%s: not a .log, .index, .timeindex, .txnindex or .snapshot file", path)
	}
}

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

func codecName(c int) string {
	if c < len(codecNames) {
		return codecNames[c]
	}
	return "unknown(" + strconv.Itoa(c) + ")"
}

// offAttributes is where the CRC's coverage starts (package batch's layout).
const offAttributes = 21

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func dumpLog(w *bufio.Writer, path string, o dumpOpts) (int, error) {
	base, err := segmentBase(path)
	if err != nil {
		return 0, err
	}
	l, err := openLogFile(path)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	fmt.Fprintf(w, "Dumping %s\n", path)
	fmt.Fprintf(w, "Log starting offset: %d\n", base)
	problems := 0
	oc := newOffsetCheck(base)
	for {
		pos, b, err := l.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var fe *framingError
			if errors.As(err, &fe) {
				fmt.Fprintf(w, "error at position %d: %v: the rest of the file (%d bytes) cannot be read\n", pos, fe.err, l.size-pos)
				return problems + 1, nil
			}
			return problems, fmt.Errorf("%s: %w", path, err)
		}
		if o.maxBytes > 0 && pos+int64(len(b)) > o.maxBytes {
			break
		}
		if !dumpBatch(w, pos, b, o) {
			problems++
		}
		if h, err := batch.ParseHeader(b); err == nil {
			if msg := oc.batch(pos, h); msg != "" {
				fmt.Fprintf(w, "problem: %s\n", msg)
				problems++
			}
		}
	}
	return problems, nil
}

// dumpBatch prints the batch at pos and reports whether it checks out.
func dumpBatch(w *bufio.Writer, pos int64, b []byte, o dumpOpts) bool {
	h, perr := batch.ParseHeader(b)
	verr := perr
	if verr == nil {
		_, verr = batch.Validate(b)
	}
	valid := verr == nil
	lastSeq := int32(-1)
	if h.BaseSequence >= 0 {
		lastSeq = h.BaseSequence + h.LastOffsetDelta
	}
	tsType := "CreateTime"
	if h.LogAppendTime() {
		tsType = "LogAppendTime"
	}
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d %s: %d size: %d magic: %d attributes: %#04x compresscodec: %s crc: %d",
		h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, lastSeq, h.ProducerID, h.ProducerEpoch,
		h.PartitionLeaderEpoch, h.Transactional(), h.Control(), pos, tsType, h.MaxTimestamp, len(b), h.Magic,
		uint16(h.Attributes), codecName(h.Compression()), h.CRC)
	if len(b) > offAttributes {
		if sum := crc32.Checksum(b[offAttributes:], castagnoli); sum != h.CRC {
			fmt.Fprintf(w, " (computed %d)", sum)
		}
	}
	fmt.Fprintf(w, " isvalid: %t\n", valid)
	if !valid {
		fmt.Fprintf(w, "error: batch at position %d: %v\n", pos, verr)
		return false
	}
	if !o.deep {
		return true
	}
	if h.Compression() != batch.CompressionNone { // decompressed up to the limit: a bomb stops there
		plain, err := batch.DecompressLimit(nil, b, h, o.maxInflate)
		if err == nil {
			h, err = batch.ParseHeader(plain)
		}
		if err != nil {
			fmt.Fprintf(w, "error: batch at position %d: %v\n", pos, err)
			return false
		}
		b = plain
	}
	err := batch.Records(b, h, func(r *batch.Record) error {
		seq := int64(-1)
		if h.BaseSequence >= 0 {
			seq = int64(h.BaseSequence) + (r.Offset - h.BaseOffset)
		}
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [", r.Offset, tsType, r.Timestamp, nullableLen(r.Key), nullableLen(r.Value), seq)
		for i, hd := range r.Headers {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(printable(hd.Key))
		}
		w.WriteByte(']')
		if o.data {
			if r.Key != nil {
				fmt.Fprintf(w, " key: %s", printable(string(r.Key)))
			}
			if r.Value != nil {
				fmt.Fprintf(w, " payload: %s", printable(string(r.Value)))
			}
			if len(r.Headers) > 0 {
				w.WriteString(" headers: [")
				for i, hd := range r.Headers {
					if i > 0 {
						w.WriteByte(',')
					}
					if hd.Value == nil {
						fmt.Fprintf(w, "%s=null", printable(hd.Key))
					} else {
						fmt.Fprintf(w, "%s=%s", printable(hd.Key), printable(string(hd.Value)))
					}
				}
				w.WriteByte(']')
			}
		}
		w.WriteByte('\n')
		return nil
	})
	if err != nil { // Validate passed, so this cannot happen; say so if it does
		fmt.Fprintf(w, "error: batch at position %d: %v\n", pos, err)
		return false
	}
	return true
}

func nullableLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// printable returns s as it is when it is printable UTF-8 without spaces
// that would break a line, and Go-quoted otherwise.
func printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) || r == '\n' || r == '\r' || r == '\t' {
			return strconv.Quote(s)
		}
	}
	return s
}

// dumpIndex prints an index file's entries and checks them against the .log
// next to it.
func dumpIndex(w *bufio.Writer, path string, timeIndex bool, o dumpOpts) (int, error) {
	base, err := segmentBase(path)
	if err != nil {
		return 0, err
	}
	x, err := readIndexFile(path, base, timeIndex)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "Dumping %s\n", path)
	if !o.indexOnly {
		if timeIndex {
			for _, e := range x.times[:x.entries()] {
				fmt.Fprintf(w, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
			}
		} else {
			for _, e := range x.offsets[:x.entries()] {
				fmt.Fprintf(w, "offset: %d position: %d\n", e.Offset, e.Position)
			}
		}
	}
	problems := 0
	report := func(format string, args ...any) {
		problems++
		fmt.Fprintf(w, "problem: "+format+"\n", args...)
	}
	if x.zeroTail > 0 && activeInLiveDir(path) {
		// The broker writes this index now: its unused slots are the
		// preallocated file, trimmed when the segment rolls or the
		// broker closes.
		fmt.Fprintf(w, "%d unused slots at the end: the active segment of a running broker, whose index is preallocated (normal; trimmed when the segment rolls or the broker stops)\n", x.zeroTail)
		shape := *x
		shape.zeroTail = 0
		reportIndexShape(report, &shape, timeIndex)
	} else {
		reportIndexShape(report, x, timeIndex)
	}
	logPath := strings.TrimSuffix(path, filepath.Ext(path)) + ".log"
	if _, err := os.Stat(logPath); err != nil {
		fmt.Fprintf(w, "%s not found: entries not checked against the log\n", filepath.Base(logPath))
		return problems, nil
	}
	var c *indexCheck
	if timeIndex {
		c = newIndexCheck(base, nil, x, nil, report)
	} else {
		c = newIndexCheck(base, x, nil, report, nil)
	}
	l, err := openLogFile(logPath)
	if err != nil {
		return problems, err
	}
	defer l.Close()
	end, complete, err := walkLog(l, c)
	if err != nil {
		return problems, fmt.Errorf("%s: %w", logPath, err)
	}
	c.finish(end, complete)
	if problems == 0 {
		fmt.Fprintf(w, "%d entries agree with %s\n", x.entries(), filepath.Base(logPath))
	}
	return problems, nil
}

// reportIndexShape reports what is wrong with an index file as a whole: a
// size that is not a whole number of entries, a preallocated tail of unused
// slots.
func reportIndexShape(report func(string, ...any), x *indexFile, timeIndex bool) {
	size := offsetEntryBytes
	if timeIndex {
		size = timeEntryBytes
	}
	if x.partial != 0 {
		report("file size %d is not a whole number of %d-byte entries", x.size, size)
	}
	if x.zeroTail > 0 {
		report("%d unused zero entries at the end: the file was not trimmed (the broker did not shut down cleanly; opening the data dir rebuilds the index)", x.zeroTail)
	}
}

// walkLog feeds every batch header of the .log to c. It returns where the
// walk ended and whether that is the end of the file; a batch whose header
// cannot be parsed ends it too (its offsets are unknown).
func walkLog(l *logFile, c *indexCheck) (end int64, complete bool, err error) {
	for {
		pos, b, err := l.next()
		if err == io.EOF {
			return pos, true, nil
		}
		var fe *framingError
		if errors.As(err, &fe) {
			return pos, false, nil
		}
		if err != nil {
			return pos, false, err
		}
		h, err := batch.ParseHeader(b)
		if err != nil {
			return pos, false, nil
		}
		c.batch(pos, h)
	}
}

// dumpSnapshot prints a producer state snapshot (log.ReadProducerSnapshot):
// one line per producer and one per batch kept of it. A damaged file is a
// problem.
func dumpSnapshot(w *bufio.Writer, path string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "Dumping %s\n", path)
	st, err := log.ReadProducerSnapshot(vfs.Default, path)
	if errors.Is(err, log.ErrCorrupt) {
		fmt.Fprintf(w, "error: %v\n", err)
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	ps := st.Producers()
	fmt.Fprintf(w, "Snapshot of the log below offset %d: %d producer(s)\n", st.EndOffset(), len(ps))
	for _, p := range ps {
		fmt.Fprintf(w, "producerId: %d producerEpoch: %d lastSequence: %d lastTimestamp: %d batches: %d\n",
			p.ProducerID, p.Epoch, p.LastSequence, p.LastTimestamp, len(p.Batches))
		for _, b := range p.Batches {
			fmt.Fprintf(w, "| firstSequence: %d lastSequence: %d firstOffset: %d lastOffset: %d offsetDelta: %d timestamp: %d\n",
				b.FirstSeq, b.LastSeq, b.FirstOffset(), b.LastOffset, b.OffsetDelta, b.MaxTimestamp)
		}
	}
	return 0, nil
}

// dumpTxnIndex prints a transaction index, an entry a line as Kafka's
// DumpLogSegments does, and checks it: its shape (index.TxnIndex's
// SanityCheck) and, against the .log next to it, that each entry's last
// offset is an ABORT marker of its producer. It returns the problems.
func dumpTxnIndex(w *bufio.Writer, path string) (int, error) {
	base, err := segmentBase(path)
	if err != nil {
		return 0, err
	}
	x, err := readTxnIndexFile(path, base)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "Dumping %s\n", path)
	for _, t := range x.entries {
		fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			t.ProducerID, t.FirstOffset, t.LastOffset, t.LastStableOffset)
	}
	problems := 0
	report := func(format string, args ...any) {
		problems++
		fmt.Fprintf(w, "problem: "+format+"\n", args...)
	}
	if x.bad != nil {
		report("%v", x.bad)
	}
	logPath := strings.TrimSuffix(path, filepath.Ext(path)) + ".log"
	if _, err := os.Stat(logPath); err != nil {
		fmt.Fprintf(w, "%s not found: entries not checked against the log\n", filepath.Base(logPath))
		return problems, nil
	}
	l, err := openLogFile(logPath)
	if err != nil {
		return problems, err
	}
	defer l.Close()
	// The ABORT markers of the log, by offset.
	aborts := map[int64]int64{}
	for {
		_, b, err := l.next()
		if err != nil {
			var fe *framingError
			if err != io.EOF && !errors.As(err, &fe) {
				return problems, fmt.Errorf("%s: %w", logPath, err)
			}
			break
		}
		m, h, err := batch.ParseMarker(b)
		if err == nil && !m.Commit {
			aborts[h.BaseOffset] = m.ProducerID
		}
	}
	for _, t := range x.entries {
		if pid, ok := aborts[t.LastOffset]; !ok || pid != t.ProducerID {
			report("entry of producer %d: no ABORT marker of it at offset %d in %s", t.ProducerID, t.LastOffset, filepath.Base(logPath))
		}
	}
	if problems == 0 {
		fmt.Fprintf(w, "%d entries agree with %s\n", len(x.entries), filepath.Base(logPath))
	}
	return problems, nil
}

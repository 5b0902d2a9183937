package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

const verifyHelp = `
Checks a whole data dir offline: every partition directory (<topic>-<N>) and
every segment in it. For each segment: every batch is validated (framing,
CRC, header fields, records), offsets must follow on from one batch to the
next and from one segment to the next, every offset-index entry must point at
the start of a batch holding its offset, and the time index must be in order
and agree with the batches' max timestamps.

DIR may also be one partition's directory: then only its segments are
checked. One line per problem goes to stdout; a summary to stderr. The exit code is 0
when everything checks out and 1 otherwise. A progress line goes to stderr
when it is a terminal, or with --progress. Files are only read, never
changed; a data dir a broker has open is refused.`

// maxProblemsPerFile bounds the lines printed for one damaged file.
const maxProblemsPerFile = 20

func runVerify(e *env, args []string) error {
	fs := newFlags(e, "verify", "[flags] DIR", verifyHelp)

	progress := fs.Bool("progress", false, "print progress to stderr even when it is not a terminal")
	jobs := fs.Int("jobs", runtime.GOMAXPROCS(0), "`N` partitions checked at once")
	quiet := fs.Bool("quiet", false, "print no summary, only the problems")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one data dir, got %d arguments", len(pos))
	}
	if *jobs < 1 {
		return usagef("--jobs must be at least 1")
	}
	v := &verifier{out: e.stdout, notes: e.stderr, dir: pos[0], jobs: *jobs}
	if *progress || e.stderrIsTTY {
		v.progress = &progressLine{w: e.stderr, tty: e.stderrIsTTY}
	}
	start := time.Now()
	if err := v.run(); err != nil {
		return err
	}
	if v.progress != nil {
		v.progress.finish()
	}
	if !*quiet {
		el := time.Since(start)
		fmt.Fprintf(e.stderr, "verified %s: %d partitions, %d segments, %d batches, %d bytes in %v (%.0f MB/s): ",
			v.dir, v.partitions, v.segments, v.batches, v.bytes, el.Round(time.Millisecond), float64(v.bytes)/1e6/max(el.Seconds(), 1e-9))
		if v.compressed > 0 {
			fmt.Fprintf(e.stderr, "%d compressed batches (decompressed, every record checked), ", v.compressed)
		}
		if v.problems == 0 {
			fmt.Fprintln(e.stderr, "everything checks out")
		} else {
			fmt.Fprintf(e.stderr, "%d problem(s)\n", v.problems)
		}
	}
	if v.problems > 0 {
		return errProblems
	}
	return nil
}

// verifier walks a data dir and prints a line per problem. run checks the
// partitions on jobs goroutines, each with a verifier of its own writing to
// a buffer; the buffers are printed in partition order as they complete.
type verifier struct {
	out      io.Writer
	notes    io.Writer // remarks that are not problems; nil: none
	dir      string
	progress *progressLine // nil: none
	jobs     int           // partitions checked at once; 0 → 1

	counts
}

// counts are what a verifier saw.
type counts struct {
	partitions, segments, batches int
	compressed                    int // compressed batches (decompressed and checked like the others)
	bytes                         int64
	problems                      int
}

func (c *counts) add(o counts) {
	c.partitions += o.partitions
	c.segments += o.segments
	c.batches += o.batches
	c.compressed += o.compressed
	c.bytes += o.bytes
	c.problems += o.problems
}

func (v *verifier) run() error {
	st, err := os.Stat(v.dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", v.dir)
	}
	if err := checkNotInUse(v.dir); err != nil {
		return err
	}
	names, err := vfs.Default.ReadDir(v.dir)
	if err != nil {
		return err
	}
	var parts []string
	for _, name := range names {
		if fi, err := os.Stat(filepath.Join(v.dir, name)); err == nil && fi.IsDir() && isPartitionDir(name) {
			parts = append(parts, name)
		}
	}
	if len(parts) == 0 {
		if logs, _ := filepath.Glob(filepath.Join(v.dir, "*.log")); len(logs) > 0 {
			// One partition's directory: its segments, without the data
			// dir's files around it.
			v.sumSizes(v.dir)
			v.partition(v.dir)
			v.partitions++
			return nil
		}
		fmt.Fprintf(v.out, "%s: no partition directories (<topic>-<partition>) and no segments: not a data dir?\n", v.dir)
		v.problems++
		return nil
	}
	meta := v.readMeta()
	v.checkTopics(meta, parts)
	for _, p := range parts {
		v.sumSizes(filepath.Join(v.dir, p))
	}

	type result struct {
		out bytes.Buffer
		counts
	}
	results := make([]chan *result, len(parts))
	for i := range results {
		results[i] = make(chan *result, 1)
	}
	var next atomic.Int64 // the next partition to take
	var wg sync.WaitGroup
	for range max(1, min(v.jobs, len(parts))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(parts) {
					return
				}
				r := &result{}
				w := &verifier{out: &r.out, notes: v.notes, dir: v.dir, progress: v.progress}
				first, end := w.partition(filepath.Join(v.dir, parts[i]))
				if first >= 0 {
					w.checkCheckpoints(meta, parts[i], first, end)
				}
				w.partitions++
				r.counts = w.counts
				results[i] <- r
			}
		}()
	}
	var werr error
	for _, ch := range results {
		r := <-ch
		if _, err := v.out.Write(r.out.Bytes()); err != nil && werr == nil {
			werr = err
		}
		v.add(r.counts)
	}
	wg.Wait()
	return werr
}

// sumSizes adds the sizes of the .log files in dir to the progress total.
func (v *verifier) sumSizes(dir string) {
	if v.progress == nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			v.progress.total += fi.Size()
		}
	}
}

// note prints a remark that is not a problem to stderr.
func (v *verifier) note(format string, args ...any) {
	if v.notes != nil {
		fmt.Fprintf(v.notes, "note: "+format+"\n", args...)
	}
}

// checkNotInUse refuses a data dir whose lock a broker holds: its active
// segments change under the reader.
func checkNotInUse(dir string) error {
	lockPath := filepath.Join(dir, ".lock")
	if _, err := os.Stat(lockPath); err != nil {
		return nil // never opened by a broker, or not a data dir: nothing holds it
	}
	l, err := vfs.Default.Lock(lockPath)
	if errors.Is(err, vfs.ErrLocked) {
		return fmt.Errorf("%s is in use by a running broker (%w): stop it first", dir, log.ErrDirInUse)
	}
	if err != nil {
		return err
	}
	return l.Close()
}

// isPartitionDir reports whether name is <topic>-<partition>.
func isPartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return false
	}
	n, err := strconv.Atoi(name[i+1:])
	return err == nil && n >= 0 && log.ValidTopicName(name[:i]) == nil
}

// reporter prints the problems of one file, up to maxProblemsPerFile.
type reporter struct {
	v    *verifier
	file string
	n    int
}

func (r *reporter) report(format string, args ...any) {
	r.n++
	r.v.problems++
	if r.n <= maxProblemsPerFile {
		fmt.Fprintf(r.v.out, "%s: "+format+"\n", append([]any{r.file}, args...)...)
	}
}

func (r *reporter) flush() {
	if r.n > maxProblemsPerFile {
		fmt.Fprintf(r.v.out, "%s: and %d more problems\n", r.file, r.n-maxProblemsPerFile)
	}
}

// partition checks the segments of one partition directory and returns the
// offsets they cover, [first, end); first is -1 when there are none.
func (v *verifier) partition(dir string) (first, end int64) {
	names, err := vfs.Default.ReadDir(dir)
	if err != nil {
		(&reporter{v: v, file: dir}).report("%v", err)
		return -1, 0
	}
	files := map[string]bool{}
	var bases []int64
	for _, n := range names {
		files[n] = true
		if filepath.Ext(n) == ".log" {
			if base, err := segmentBase(n); err == nil {
				bases = append(bases, base)
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	pr := &reporter{v: v, file: dir}
	for _, n := range names {
		ext := filepath.Ext(n)
		if ext != ".index" && ext != ".timeindex" {
			continue
		}
		if base, err := segmentBase(n); err == nil && !files[segment.Name(base, ".log")] {
			pr.report("%s has no .log: a leftover of a deleted segment", n)
		}
	}
	if len(bases) == 0 {
		pr.report("no segments")
	}
	pr.flush()
	next, first := int64(-1), int64(-1)
	if len(bases) > 0 {
		first = bases[0]
	}
	for _, base := range bases {
		if next >= 0 && base != next {
			r := &reporter{v: v, file: filepath.Join(dir, segment.Name(base, ".log"))}
			if base > next {
				r.report("segment starts at offset %d, the one before it ends at %d: offsets %d..%d are missing", base, next-1, next, base-1)
			} else {
				r.report("segment starts at offset %d, inside the one before it (which ends at %d)", base, next-1)
			}
			r.flush()
		}
		next = v.segment(dir, base, files)
		v.segments++
	}
	return first, next
}

// segment checks one segment and returns the offset after its last batch.
// Every error is a problem it reports: the walk goes on with the next
// segment.
func (v *verifier) segment(dir string, base int64, files map[string]bool) int64 {
	logName := segment.Name(base, ".log")
	lr := &reporter{v: v, file: filepath.Join(dir, logName)}
	defer lr.flush()
	var idx [2]*indexFile
	var irs [2]*reporter
	for i, ext := range []string{".index", ".timeindex"} {
		name := segment.Name(base, ext)
		irs[i] = &reporter{v: v, file: filepath.Join(dir, name)}
		defer irs[i].flush()
		if !files[name] {
			irs[i].report("missing (opening the data dir rebuilds it)")
			continue
		}
		x, err := readIndexFile(filepath.Join(dir, name), base, i == 1)
		if err != nil {
			irs[i].report("%v", err)
			continue
		}
		reportIndexShape(irs[i].report, x, i == 1)
		idx[i] = x
	}
	c := newIndexCheck(base, idx[0], idx[1], irs[0].report, irs[1].report)

	l, err := openLogFile(filepath.Join(dir, logName))
	if err != nil {
		lr.report("%v", err)
		return base
	}
	defer l.Close()
	oc := newOffsetCheck(base)
	for {
		pos, b, err := l.next()
		if err == io.EOF {
			c.finish(pos, true)
			v.bytes += pos
			return oc.next
		}
		var fe *framingError
		if errors.As(err, &fe) {
			lr.report("batch at byte %d: %v; the remaining %d bytes cannot be read", pos, fe.err, l.size-pos)
			c.finish(pos, false)
			v.bytes += l.size
			return oc.next
		}
		if err != nil { // an I/O error: what follows cannot be read
			lr.report("byte %d: %v", pos, err)
			c.finish(pos, false)
			v.bytes += l.size
			return oc.next
		}
		v.batches++
		h, verr := batch.Validate(b)
		if verr == nil && h.Compression() != 0 {
			v.compressed++ // decompressed and every record checked
		}
		if verr != nil {
			lr.report("batch at byte %d (offsets %d..%d): %v", pos, h.BaseOffset, h.LastOffset(), verr)
			if _, perr := batch.ParseHeader(b); perr != nil {
				continue // the offsets in the header are not to be trusted
			}
		}
		if msg := oc.batch(pos, h); msg != "" {
			lr.report("%s", msg)
		}
		c.batch(pos, h)
		v.progress.advance(int64(len(b)), lr.file)
	}
}

// progressLine prints "verify: 42% ..." to stderr at most every
// progressEvery, rewriting one line on a terminal and one line per update
// otherwise. The goroutines that check partitions share it. A nil
// *progressLine prints nothing.
type progressLine struct {
	w     io.Writer
	tty   bool
	total int64 // bytes of .log files, summed before the checks start

	done  atomic.Int64 // bytes checked
	last  atomic.Int64 // time of the last line, unix ns
	mu    sync.Mutex   // held to print
	shown bool
}

const progressEvery = 250 * time.Millisecond

// advance counts n bytes of file checked, and prints a line if it is time.
func (p *progressLine) advance(n int64, file string) {
	if p == nil {
		return
	}
	done := p.done.Add(n)
	now, last := time.Now().UnixNano(), p.last.Load()
	if now-last < int64(progressEvery) && last != 0 || !p.last.CompareAndSwap(last, now) {
		return
	}
	pct := 100.0
	if p.total > 0 {
		pct = min(100, 100*float64(done)/float64(p.total))
	}
	line := fmt.Sprintf("verify: %5.1f%% %d of %d MB, at %s", pct, done>>20, p.total>>20, file)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.shown = true
}

// finish clears the line on a terminal.
func (p *progressLine) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

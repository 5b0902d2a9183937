package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The strata command, built once for the test process by strataBinary.
var (
	strataBuildOnce sync.Once
	strataBinPath   string
	strataBuildErr  error
)

// strataBinary builds the strata command (once per test process; with -race
// when this test binary has it, so that the race detector watches the server
// too) and returns its path. It goes into a directory next to the test
// binary when that is a temporary one (go test's work directory, removed
// when go test ends), else into a new temporary directory, left behind.
func strataBinary(t *testing.T) string {
	t.Helper()
	strataBuildOnce.Do(func() {
		parent := ""
		if exe, err := os.Executable(); err == nil {
			if rel, err := filepath.Rel(os.TempDir(), exe); err == nil && !strings.HasPrefix(rel, "..") {
				parent = filepath.Dir(exe)
			}
		}
		dir, err := os.MkdirTemp(parent, "strata-serve-")
		if err != nil {
			strataBuildErr = err
			return
		}
		bin := filepath.Join(dir, "strata")
		args := []string{"build", "-o", bin}
		if raceBuild() {
			args = append(args, "-race")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// From the interop module (the test's working directory), whose
		// replace directive resolves the command to ../cmd/strata.
		cmd := exec.CommandContext(ctx, "go", append(args, "github.com/strata-log/strata/cmd/strata")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			strataBuildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
			return
		}
		strataBinPath = bin
	})
	if strataBuildErr != nil {
		t.Fatal(strataBuildErr)
	}
	return strataBinPath
}

// raceBuild reports whether this test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// listenWriter is serve's stdout: it keeps everything, and sends the
// address of the first "listening on HOST:PORT" line on addr.
type listenWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
	addr chan string // buffered, 1
}

func (w *listenWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		for line := range strings.Lines(w.buf.String()) {
			if a, ok := strings.CutPrefix(line, "listening on "); ok && strings.HasSuffix(a, "\n") {
				w.addr <- strings.TrimSpace(a)
				w.sent = true
				break
			}
		}
	}
	return len(p), nil
}

// serveProc is a running strata serve process.
type serveProc struct {
	cmd    *exec.Cmd
	addr   string
	stdout *listenWriter
	stderr *syncBuffer
	exited chan struct{} // closed once Wait has returned
	err    error         // of Wait, once exited is closed
}

// startServeProc starts bin serve on dir on a free port of 127.0.0.1 and
// waits, bounded by ctx, for it to print the address it bound. stdout and
// stderr are read all along, so that serve never blocks on them. A process
// still running when the test ends is killed.
func startServeProc(ctx context.Context, t *testing.T, bin, dir string) *serveProc {
	t.Helper()
	s := &serveProc{
		stdout: &listenWriter{addr: make(chan string, 1)},
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	s.cmd = exec.Command(bin, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--auto-create-topics")
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("strata serve (pid %d) stderr:\n%s", s.cmd.Process.Pid, s.stderr)
		}
	})
	select {
	case s.addr = <-s.stdout.addr:
	case <-s.exited:
		t.Fatalf("strata serve exited before listening: %v", s.err)
	case <-ctx.Done():
		t.Fatalf("strata serve printed no address: %v", ctx.Err())
	}
	return s
}

// stop sends SIGTERM and waits, bounded by ctx, for serve to exit 0 having
// logged its shutdown.
func (s *serveProc) stop(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-ctx.Done():
		t.Fatalf("strata serve still running after SIGTERM: %v", ctx.Err())
	}
	if s.err != nil {
		t.Fatalf("strata serve after SIGTERM: %v; stderr:\n%s", s.err, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "shutting down") {
		t.Errorf("strata serve did not log its shutdown:\n%s", s.stderr)
	}
}

// serveProcRec is a record the test produces, and where it was stored.
type serveProcRec struct {
	key, value []byte
	headers    []kgo.RecordHeader
	ts         time.Time
	partition  int32
	offset     int64
}

// checkServeProcRecs checks that got holds each of want once, where it was
// stored and as it was produced; what names the read.
func checkServeProcRecs(t *testing.T, what string, want map[string]*serveProcRec, got []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d records, want %d", what, len(got), len(want))
	}
	seen := map[string]bool{}
	for _, r := range got {
		w, ok := want[string(r.Key)]
		if !ok {
			t.Errorf("%s: %d/%d: unexpected key %q", what, r.Partition, r.Offset, r.Key)
			continue
		}
		if seen[string(r.Key)] {
			t.Errorf("%s: %d/%d: key %q read twice", what, r.Partition, r.Offset, r.Key)
		}
		seen[string(r.Key)] = true
		if r.Partition != w.partition || r.Offset != w.offset {
			t.Errorf("%s: key %q at %d/%d, produced to %d/%d", what, r.Key, r.Partition, r.Offset, w.partition, w.offset)
		}
		if !bytes.Equal(r.Value, w.value) {
			t.Errorf("%s: %d/%d: value %q, want %q", what, r.Partition, r.Offset, r.Value, w.value)
		}
		if !sameKgoHeaders(r.Headers, w.headers) {
			t.Errorf("%s: %d/%d: headers %v, want %v", what, r.Partition, r.Offset, r.Headers, w.headers)
		}
		if !r.Timestamp.Equal(w.ts) {
			t.Errorf("%s: %d/%d: timestamp %d, want %d", what, r.Partition, r.Offset, r.Timestamp.UnixMilli(), w.ts.UnixMilli())
		}
		// kgo's defaults, as the batches were written and read back.
		if ct := r.Attrs.CompressionType(); ct != 2 {
			t.Errorf("%s: %d/%d: codec %d, want snappy (2)", what, r.Partition, r.Offset, ct)
		}
		if r.ProducerID < 0 {
			t.Errorf("%s: %d/%d: producer id %d: not produced idempotently", what, r.Partition, r.Offset, r.ProducerID)
		}
	}
}

func sameKgoHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// pollServeProc polls cl, bounded by ctx, until it has n records.
func pollServeProc(ctx context.Context, t *testing.T, what string, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: %d of %d records: %v", what, len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("%s: %s/%d: %v", what, topic, p, err)
		})
		got = append(got, fs.Records()...)
	}
	return got
}

// checkCommittedAtEnds checks that group's committed offsets of topic are
// the partitions' end offsets, which hold n records in all.
func checkCommittedAtEnds(ctx context.Context, t *testing.T, what string, adm *kadm.Client, group, topic string, partitions, n int) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("%s: list end offsets: %v, %v", what, err, ends.Error())
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil || committed.Error() != nil {
		t.Fatalf("%s: fetch offsets of %s: %v, %v", what, group, err, committed.Error())
	}
	var sum int64
	parts := 0
	ends.Each(func(e kadm.ListedOffset) {
		parts++
		sum += e.Offset
		o, ok := committed.Lookup(topic, e.Partition)
		if !ok || o.At != e.Offset {
			t.Errorf("%s: %s/%d: committed %+v (found: %v), want the end offset %d", what, topic, e.Partition, o, ok, e.Offset)
		}
	})
	if parts != partitions || sum != int64(n) {
		t.Errorf("%s: %d partitions ending at %d records in all, want %d and %d: %v", what, parts, sum, partitions, n, ends)
	}
}

// TestServeProcess (issue 14): strata serve as a process; a kgo client with
// its defaults (idempotent, snappy) produces keyed records with headers and
// a kgo group consumer consumes them all and commits; SIGTERM, and serve
// exits 0; served again from the same data dir (on a new port), the records
// are all there, as produced and where they were stored, and so are the
// group's committed offsets, at the end offsets.
func TestServeProcess(t *testing.T) {
	const topic, group, partitions, n = "orders", "billing", 3, 100
	bin := strataBinary(t)
	dir := filepath.Join(t.TempDir(), "data")
	ctx := testCtx(t, 2*time.Minute)

	// Timestamps to the millisecond, and recent: retention (7 days by
	// default) must not delete them when the server starts again.
	base := time.UnixMilli(time.Now().UnixMilli())
	want := map[string]*serveProcRec{}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		r := &serveProcRec{
			key:   fmt.Appendf(nil, "key-%03d", i),
			value: fmt.Appendf(nil, "value-%d:%s", i, bytes.Repeat([]byte{'a' + byte(i%26)}, 10+i%40)),
			headers: []kgo.RecordHeader{
				{Key: "trace", Value: fmt.Appendf(nil, "t-%d", i)},
				{Key: "empty", Value: []byte{}},
			},
			ts: base.Add(time.Duration(i) * time.Millisecond),
		}
		want[string(r.key)] = r
		recs[i] = &kgo.Record{Topic: topic, Key: r.key, Value: r.value, Headers: r.headers, Timestamp: r.ts}
	}

	s := startServeProc(ctx, t, bin, dir)
	func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		created, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err != nil || created.Err != nil {
			t.Fatalf("create %s: %v, %v", topic, err, created.Err)
		}
		results := cl.ProduceSync(ctx, recs...)
		if err := results.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		used := map[int32]bool{}
		for _, pr := range results {
			w := want[string(pr.Record.Key)]
			w.partition, w.offset = pr.Record.Partition, pr.Record.Offset
			used[pr.Record.Partition] = true
		}
		if len(used) != partitions {
			t.Errorf("the keys went to partitions %v, want all %d", used, partitions)
		}

		gcl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer gcl.Close() // leaves the group, after the commit below
		checkServeProcRecs(t, "group consumer", want, pollServeProc(ctx, t, "group consumer", gcl, n))
		if err := gcl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		checkCommittedAtEnds(ctx, t, "before SIGTERM", adm, group, topic, partitions, n)
	}()
	if t.Failed() {
		t.FailNow()
	}
	s.stop(ctx, t)

	s2 := startServeProc(ctx, t, bin, dir)
	t.Logf("served on %s, then on %s", s.addr, s2.addr)
	func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s2.addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		checkServeProcRecs(t, "after restart", want, pollServeProc(ctx, t, "after restart", cl, n))
		checkCommittedAtEnds(ctx, t, "after restart", kadm.NewClient(cl), group, topic, partitions, n)
	}()
	s2.stop(ctx, t)
}

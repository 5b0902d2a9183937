package interop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The chaos test (issue 24): three `strata serve` processes of one cluster, a
// kgo producer with its defaults (idempotent, acks=all) and a kgo group
// consumer, while members are SIGKILLed and restarted, or SIGSTOPped and
// SIGCONTed, one at a time. At the end every acknowledged record is in the log
// once, at the offset it was acknowledged at, every replica of every partition
// holds the same batches, and the group consumer saw every acknowledged record.
//
// By default it runs chaosDefaultKills kills (and the stops between them);
// STRATA_CHAOS=10m runs it for that long instead (`make chaos`).

const (
	chaosTopic        = "chaos"
	chaosGroup        = "chaos-readers"
	chaosPartitions   = 3
	chaosMembers      = 3
	chaosDefaultKills = 5
	chaosRate         = 5000 // records a second at most
)

// chaosMember is one `strata serve` process of the chaos cluster: its flags
// stay the same across restarts, so that it comes back as the same member on
// the same data dir and ports.
type chaosMember struct {
	id     int
	args   []string
	dir    string
	addr   string // Kafka listener
	proc   *exec.Cmd
	exited chan struct{}
	stderr *syncBuffer
	logs   []*syncBuffer // stderr of every run, for a failing test
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// start runs the member's process and waits, bounded by ctx, until it prints
// that it listens.
func (m *chaosMember) start(ctx context.Context, t *testing.T, bin string) {
	t.Helper()
	lw := &listenWriter{addr: make(chan string, 1)}
	m.stderr = &syncBuffer{}
	m.logs = append(m.logs, m.stderr)
	m.exited = make(chan struct{})
	m.proc = exec.Command(bin, m.args...)
	m.proc.Stdout, m.proc.Stderr = lw, m.stderr
	if err := m.proc.Start(); err != nil {
		t.Fatal(err)
	}
	exited, proc := m.exited, m.proc
	go func() {
		proc.Wait()
		close(exited)
	}()
	select {
	case <-lw.addr:
	case <-exited:
		t.Fatalf("member %d exited before listening:\n%s", m.id, m.stderr)
	case <-ctx.Done():
		t.Fatalf("member %d printed no address: %v\n%s", m.id, ctx.Err(), m.stderr)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (m *chaosMember) kill(t *testing.T) {
	t.Helper()
	if err := m.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-m.exited
}

// running reports whether the member's process has not exited.
func (m *chaosMember) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// chaosDuration is how long the long run lasts, from STRATA_CHAOS, or 0 for
// the short run.
func chaosDuration(t *testing.T) time.Duration {
	v := os.Getenv("STRATA_CHAOS")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("STRATA_CHAOS=%q: want a duration such as 10m", v)
	}
	return d
}

func TestChaosProcesses(t *testing.T) {
	long := chaosDuration(t)
	bin := strataBinary(t)
	timeout := 4 * time.Minute
	if long > 0 {
		timeout = long + 5*time.Minute
	}
	ctx := testCtx(t, timeout)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("STRATA_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d (STRATA_CHAOS_SEED=%d replays the choices of members and actions)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	addrs := freeAddrs(t, 2*chaosMembers)
	var peers []string
	for i := range chaosMembers {
		peers = append(peers, "--peer", fmt.Sprintf("%d=%s,%s", i+1, addrs[2*i], addrs[2*i+1]))
	}
	root := t.TempDir()
	members := make([]*chaosMember, chaosMembers)
	for i := range members {
		id := i + 1
		dir := filepath.Join(root, fmt.Sprintf("d%d", id))
		members[i] = &chaosMember{
			id:   id,
			dir:  dir,
			addr: addrs[2*i],
			args: append([]string{"serve", "--data-dir", dir, "--node-id", strconv.Itoa(id),
				"--listen", addrs[2*i], "--raft-addr", addrs[2*i+1]}, peers...),
		}
	}
	t.Cleanup(func() {
		for _, m := range members {
			if m.proc != nil && m.running() {
				m.proc.Process.Signal(syscall.SIGCONT)
				m.proc.Process.Kill()
				<-m.exited
			}
		}
		if t.Failed() {
			for _, m := range members {
				for i, l := range m.logs {
					t.Logf("member %d, run %d, stderr:\n%s", m.id, i+1, l)
				}
			}
		}
	})
	for _, m := range members {
		m.start(ctx, t, bin)
	}
	seeds := make([]string, len(members))
	for i, m := range members {
		seeds[i] = m.addr
	}

	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	created, err := adm.CreateTopic(ctx, chaosPartitions, chaosMembers, map[string]*string{"min.insync.replicas": new("2")}, chaosTopic)
	if err != nil || created.Err != nil {
		t.Fatalf("create %s: %v, %v", chaosTopic, err, created.Err)
	}
	waitHealthy(ctx, t, adm, "after create")

	// The producer: one record at a time in flight per key range would be
	// slow; kgo batches what is buffered, and a record counts only once
	// its promise says it was acknowledged.
	type ack struct {
		partition int32
		offset    int64
	}
	var (
		ackMu   sync.Mutex
		acked   = map[string]ack{}
		prodErr error
		lastAck time.Time
		maxGap  time.Duration // the longest time between two acknowledgements
		// The longest time between two acknowledgements while each
		// disturbance lasted (until the cluster was whole again), and
		// whether it was a kill; gaps[0] is before the first.
		gaps  = []time.Duration{0}
		kinds = []bool{false}
	)
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(chaosTopic),
		kgo.MaxBufferedRecords(2000))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	stopProducing := make(chan struct{})
	var prodWG sync.WaitGroup
	prodWG.Go(func() {
		// At most chaosRate records a second, so that a long run's
		// bookkeeping stays small.
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ; i++ {
			if i%(chaosRate/100) == 0 {
				select {
				case <-stopProducing:
					return
				case <-pace.C:
				}
			}
			key := fmt.Sprintf("k-%08d", i)
			r := &kgo.Record{Key: []byte(key), Value: fmt.Appendf(nil, "v-%d-%s", i, strings.Repeat("x", i%64))}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				ackMu.Lock()
				defer ackMu.Unlock()
				if err != nil {
					if prodErr == nil && ctx.Err() == nil {
						prodErr = fmt.Errorf("produce %s: %w", r.Key, err)
					}
					return
				}
				acked[string(r.Key)] = ack{r.Partition, r.Offset}
				now := time.Now()
				if !lastAck.IsZero() {
					maxGap = max(maxGap, now.Sub(lastAck))
					gaps[len(gaps)-1] = max(gaps[len(gaps)-1], now.Sub(lastAck))
				}
				lastAck = now
			})
		}
	})
	ackedCount := func() int {
		ackMu.Lock()
		defer ackMu.Unlock()
		return len(acked)
	}

	// The consumer: a group member with kgo's defaults (autocommit).
	var (
		seenMu sync.Mutex
		seen   = map[string]int{}
	)
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(chaosGroup), kgo.ConsumeTopics(chaosTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	consCtx, stopConsuming := context.WithCancel(ctx)
	var consWG sync.WaitGroup
	consWG.Go(func() {
		for consCtx.Err() == nil {
			fs := cons.PollFetches(consCtx)
			seenMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++ })
			seenMu.Unlock()
		}
	})
	defer func() {
		stopConsuming()
		consWG.Wait()
		cons.Close()
	}()

	// Chaos: one member disturbed at a time; the cluster back to every
	// replica in sync before the next.
	var kills, stops int
	start := time.Now()
	more := func() bool {
		if long > 0 {
			return time.Since(start) < long
		}
		return kills < chaosDefaultKills
	}
	for more() {
		if err := ctx.Err(); err != nil {
			t.Fatalf("after %d kills and %d stops: %v", kills, stops, err)
		}
		before := ackedCount()
		kill := rng.IntN(3) != 0
		ackMu.Lock()
		gaps, kinds = append(gaps, 0), append(kinds, kill)
		ackMu.Unlock()
		m := members[rng.IntN(len(members))]
		pause := time.Duration(200+rng.IntN(1800)) * time.Millisecond
		if !kill {
			stops++
			t.Logf("%v: SIGSTOP member %d for %v (%d records acknowledged)", time.Since(start).Round(time.Millisecond), m.id, pause, before)
			if err := m.proc.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			hold(ctx, pause)
			if err := m.proc.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		} else {
			kills++
			t.Logf("%v: SIGKILL member %d, down %v (%d records acknowledged)", time.Since(start).Round(time.Millisecond), m.id, pause, before)
			m.kill(t)
			hold(ctx, pause)
			m.start(ctx, t, bin)
		}
		waitHealthy(ctx, t, adm, fmt.Sprintf("after disturbing member %d", m.id))
		waitMemberKnows(ctx, t, admCl, m.id)
		// The producer makes progress between disturbances.
		waitFor(ctx, t, "the producer to go on", func() bool { return ackedCount() > before })
	}

	close(stopProducing)
	prodWG.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	waitHealthy(ctx, t, adm, "at the end") // every replica in the ISR: each holds every acknowledged record
	ackMu.Lock()
	if prodErr != nil {
		t.Errorf("the producer failed a record: %v", prodErr)
	}
	want, gap := maps.Clone(acked), maxGap
	var killGaps, stopGaps []time.Duration
	for i, g := range gaps[1:] {
		if kinds[i+1] {
			killGaps = append(killGaps, g)
		} else {
			stopGaps = append(stopGaps, g)
		}
	}
	ackMu.Unlock()
	t.Logf("%d kills, %d stops in %v; %d records acknowledged; the longest time without an acknowledgement %v",
		kills, stops, time.Since(start).Round(time.Millisecond), len(want), gap.Round(time.Millisecond))
	t.Logf("the longest time without an acknowledgement per kill: %s", gapSummary(killGaps))
	t.Logf("the same per SIGSTOP (kgo waits out its 10 s produce request timeout on a stopped leader's open connection): %s", gapSummary(stopGaps))

	// The group consumer sees every acknowledged record.
	waitFor(ctx, t, "the group consumer to see every acknowledged record", func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		for k := range want {
			if seen[k] == 0 {
				return false
			}
		}
		return true
	})

	// Every acknowledged record is in the log once, at its offset.
	reader, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(chaosTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ends, err := adm.ListEndOffsets(ctx, chaosTopic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets: %v %v", err, ends.Error())
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	inLog := map[string][]ack{}
	for n := int64(0); n < total; {
		fs := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", n, total, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("read back %s/%d: %v (retried)", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			n++
			inLog[string(r.Key)] = append(inLog[string(r.Key)], ack{r.Partition, r.Offset})
		})
	}
	for k, a := range want {
		got := inLog[k]
		if len(got) != 1 || got[0] != a {
			t.Errorf("record %s acknowledged at %d/%d, in the log at %v", k, a.partition, a.offset, got)
		}
	}
	for k, at := range inLog {
		if len(at) > 1 {
			t.Errorf("record %s in the log %d times: %v", k, len(at), at)
		}
	}

	// Every replica holds the same batches: stop every member cleanly and
	// compare their partition files.
	stopConsuming()
	consWG.Wait()
	for _, m := range members {
		if err := m.proc.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		select {
		case <-m.exited:
		case <-ctx.Done():
			t.Fatalf("member %d still running after SIGTERM", m.id)
		}
	}
	for p := range chaosPartitions {
		var first []byte
		for i, m := range members {
			sum := replicaDigest(t, filepath.Join(m.dir, "data", fmt.Sprintf("%s-%d", chaosTopic, p)))
			if i == 0 {
				first = sum
			} else if !bytes.Equal(sum, first) {
				t.Errorf("partition %d: member %d's replica differs from member 1's", p, m.id)
			}
		}
	}
	if !t.Failed() {
		t.Logf("chaos: %d kills, %d stops, %d records acknowledged, %d in the log, 0 lost, replicas identical", kills, stops, len(want), total)
	}
}

// gapSummary says the median and the largest of gaps.
func gapSummary(gaps []time.Duration) string {
	if len(gaps) == 0 {
		return "none"
	}
	slices.Sort(gaps)
	return fmt.Sprintf("median %v, max %v over %d", gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), len(gaps))
}

// hold pauses the chaos loop for d (a deliberate outage, not a wait for an
// event), or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// waitFor polls cond every 50 ms until it holds, bounded by ctx.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// waitHealthy waits until the topic's every partition has a leader and all
// chaosMembers replicas in its ISR.
func waitHealthy(ctx context.Context, t *testing.T, adm *kadm.Client, what string) {
	t.Helper()
	var last string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		md, err := adm.Metadata(ctx, chaosTopic)
		if err == nil {
			td, ok := md.Topics[chaosTopic]
			healthy := ok && td.Err == nil && len(td.Partitions) == chaosPartitions
			if healthy {
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 || len(p.ISR) != chaosMembers {
						healthy = false
						last = fmt.Sprintf("partition %d: leader %d, ISR %v, %v", p.Partition, p.Leader, p.ISR, p.Err)
					}
				}
			} else {
				last = fmt.Sprintf("topic: found %v, %v", ok, td.Err)
			}
			if healthy {
				return
			}
		} else {
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: the cluster is not healthy: %s", what, last)
		}
	}
}

// waitMemberKnows waits until member id itself answers Metadata for the
// topic with every partition led and every member registered: a member back
// from a kill serves what the cluster has, not an empty or partial view.
func waitMemberKnows(ctx context.Context, t *testing.T, cl *kgo.Client, id int) {
	t.Helper()
	var last string
	waitFor(ctx, t, fmt.Sprintf("member %d to know the cluster", id), func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(chaosTopic)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		r, err := cl.Broker(id).Request(rctx, req)
		if err != nil {
			last = err.Error()
			return false
		}
		resp := r.(*kmsg.MetadataResponse)
		if len(resp.Brokers) != chaosMembers || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 ||
			len(resp.Topics[0].Partitions) != chaosPartitions {
			last = fmt.Sprintf("%d brokers, topics %+v", len(resp.Brokers), resp.Topics)
			return false
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				last = fmt.Sprintf("partition %d: leader %d, error %d", p.Partition, p.Leader, p.ErrorCode)
				return false
			}
		}
		return true
	})
	_ = last
}

// replicaDigest hashes the batches of a partition directory's .log files in
// offset order, each batch whole but for its partition leader epoch field
// and its position in a file: two replicas with the same batches have the
// same digest however their segments were rolled.
func replicaDigest(t *testing.T, dir string) []byte {
	t.Helper()
	var logs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".log") {
			logs = append(logs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(logs) // 20-digit base offsets sort as numbers
	h := sha256.New()
	var batches int
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) >= 12 {
			n := int(binary.BigEndian.Uint32(b[8:12]))
			if n < 49 || 12+n > len(b) {
				t.Fatalf("%s: a torn batch after a clean stop", path)
			}
			h.Write(b[:12])
			h.Write(b[16 : 12+n]) // from magic on: the CRC covers attributes on
			b = b[12+n:]
			batches++
		}
	}
	if batches == 0 {
		t.Errorf("%s: no batches", dir)
	}
	return h.Sum(nil)
}

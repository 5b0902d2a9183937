package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/log"
)

// TestKgoClusterGroupETLKill is kgo's TestGroupETL in miniature against a
// three-member cluster with a member killed mid-run: three kgo group
// members consume etl-in, produce each record to etl-out (idempotent,
// acks=all) and commit only what etl-out acknowledged; the member that
// coordinates the group and leads a partition of etl-in is stopped while
// they run and the second half of etl-in is produced. The survivors carry the group to the end of etl-in, and no
// record is lost: every record of etl-in below the group's committed
// offset — the offsets committed right after the kill, at the new
// coordinator, and at the end — is in etl-out (at least once: a record
// processed but not yet committed when a partition moved is processed
// again).
func TestKgoClusterGroupETLKill(t *testing.T) {
	const in, out, parts, n = "etl-in", "etl-out", 6, 3000
	c := startCluster(t, 3)
	ctx := testCtx(t, 120*time.Second)
	for _, topic := range []string{in, out} {
		if err := c.any().CreateTopic(ctx, topic, log.TopicConfig{Partitions: parts, ReplicationFactor: 3, MinInSyncReplicas: 2}); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(newClusterKgo(t, c))
	c.createOffsetsTopic(ctx, adm)
	victim, group := 0, ""
	for p := range parts {
		if g, ok := c.groupLedBy(c.leader(in, p)); ok {
			victim, group = c.leader(in, p), g
			break
		}
	}
	if group == "" {
		t.Fatalf("no leader of %s leads a partition of %s", in, log.OffsetsTopic)
	}

	// The input: its first half before the ETL starts, the second while the
	// victim is stopped.
	produce := func(from, to int) error {
		prod := newClusterKgo(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.RecordDeliveryTimeout(30*time.Second))
		defer prod.Close()
		for i := from; i < to; i += 50 {
			recs := make([]*kgo.Record, 0, 50)
			for j := i; j < min(i+50, to); j++ {
				recs = append(recs, &kgo.Record{Topic: in, Value: fmt.Appendf(nil, "v%05d", j)})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := produce(0, n/2); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	etlCtx, stopETL := context.WithCancel(ctx)
	defer func() { stopETL(); wg.Wait() }()
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for etlCtx.Err() == nil {
				etlWorker(etlCtx, t, c, group, in, out, i) // a worker whose produce failed starts again
			}
		}()
	}

	// Kill the victim once the group has committed part of the input,
	// while the second half is produced.
	awaitProgress(ctx, t, adm, group, in, n/4)
	produced := make(chan error, 1)
	go func() { produced <- produce(n/2, n) }()
	c.stop(victim)
	t.Logf("member %d (the coordinator of %s and a leader of %s) stopped", victim, group, in)
	adm = kadm.NewClient(newClusterKgo(t, c)) // a fresh client: kgo keeps dialing the stopped member for a while
	afterKill := committedOffsets(ctx, t, adm, group, in, true)
	if err := <-produced; err != nil {
		t.Fatalf("produce the second half: %v", err)
	}

	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	awaitCommitted(ctx, t, adm, group, in, ends)
	stopETL()
	wg.Wait()

	// Every input record below a committed offset is in the output.
	inputs := readAll(ctx, t, c, in)
	outputs := map[string]int{}
	for _, ps := range readAll(ctx, t, c, out) {
		for _, v := range ps {
			outputs[v]++
		}
	}
	dups := 0
	for _, v := range outputs {
		dups += v - 1
	}
	for p, vals := range inputs {
		if int64(len(vals)) != ends[in][int32(p)].Offset {
			t.Fatalf("%s-%d: read %d records, end offset %d", in, p, len(vals), ends[in][int32(p)].Offset)
		}
		for off, v := range vals {
			if outputs[v] == 0 {
				t.Errorf("%s-%d offset %d (%s): committed (right after the kill: %d, at the end: %d) but not in %s",
					in, p, off, v, afterKill[int32(p)], len(vals), out)
			}
		}
	}
	t.Logf("%d input records, all in %s (%d processed twice); committed right after the kill: %v", n, out, dups, afterKill)
	if len(outputs) != n {
		t.Fatalf("%d distinct values in %s, want %d", len(outputs), out, n)
	}
}

// etlWorker is one member of the ETL group until ctx ends or a produce
// fails (then it closes without committing what it polled since its last
// commit, and the caller starts another).
func etlWorker(ctx context.Context, t *testing.T, c *cluster, group, in, out string, id int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.Dialer(c.dial),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			// Everything polled was produced before the next poll.
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("worker %d: commit on revoke: %v", id, err)
			}
		}))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		fs.EachError(func(topic string, p int32, err error) {
			switch {
			case errors.Is(err, context.Canceled), kerr.IsRetriable(err):
			case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.RebalanceInProgress):
				t.Logf("worker %d: kgo group (it rejoins): %v", id, err)
			default:
				t.Errorf("worker %d: kgo fetch %s/%d: %v", id, topic, p, err)
			}
		})
		var batch []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			batch = append(batch, &kgo.Record{Topic: out, Value: r.Value})
		})
		if len(batch) > 0 {
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				t.Logf("worker %d: produce of %d records: %v; closing without a commit", id, len(batch), err)
				return
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("worker %d: commit: %v", id, err)
			}
		}
		cl.AllowRebalance()
	}
}

// awaitProgress waits (polling: nothing announces a commit to a client)
// until the group has committed at least that many records of topic.
func awaitProgress(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, least int64) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var sum int64
		for _, off := range committedOffsets(ctx, t, adm, group, topic, false) {
			sum += off
		}
		if sum >= least {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s committed %d records of %s, waiting for %d", group, sum, topic, least)
		case <-tick.C:
		}
	}
}

// readAll returns the values of every record of topic up to its end
// offsets now, partition by partition.
func readAll(ctx context.Context, t *testing.T, c *cluster, topic string) [][]string {
	t.Helper()
	adm := kadm.NewClient(newClusterKgo(t, c))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, len(ends[topic]))
	want := 0
	for p, e := range ends[topic] {
		out[p] = make([]string, 0, e.Offset)
		want += int(e.Offset)
	}
	cl := newClusterKgo(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: func() map[int32]kgo.Offset {
		m := map[int32]kgo.Offset{}
		for p := range ends[topic] {
			m[p] = kgo.NewOffset().AtStart()
		}
		return m
	}()}))
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s: %v", got, want, topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[topic][r.Partition].Offset {
				out[r.Partition] = append(out[r.Partition], string(r.Value))
				got++
			}
		})
	}
	return out
}

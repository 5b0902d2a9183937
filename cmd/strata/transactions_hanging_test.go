package main

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
)

// TestTransactionsFindHanging: a data dir with three open transactions
// idle for an hour (one of a producer no coordinator knows, one whose
// coordinator is at an older epoch than the partition's, one its
// coordinator will end) and a recent one of an unknown producer; strata
// serve on it; find-hanging lists the first two, by topic or by broker,
// none past a larger --max-transaction-timeout, and one fewer once one is
// aborted.
func TestTransactionsFindHanging(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic("t", log.TopicConfig{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := b.TxnCoordinator(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour).UnixMilli()
	appendTxn := func(partition int, pid int64, epoch int16, ts int64) {
		t.Helper()
		var bd batch.Builder
		bd.Reset(ts)
		bd.SetProducer(pid, epoch, 0)
		bd.Append(ts, nil, []byte("v"), nil)
		raw := slices.Clone(bd.Bytes())
		raw[22] |= 0x10 // transactional
		batch.SetCRC(raw)
		p, err := b.Partition("t", partition)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.AppendBatch(raw); err != nil {
			t.Fatal(err)
		}
	}
	open := func(id string, partition int) (int64, int16) {
		t.Helper()
		pid, err := c.InitProducerID(ctx, id, 10*time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddPartitions(ctx, id, pid.ID, pid.Epoch, []tp.TopicPartition{{Topic: "t", Partition: partition}}, 0); err != nil {
			t.Fatal(err)
		}
		return pid.ID, pid.Epoch
	}
	appendTxn(0, 9000, 0, hourAgo) // no coordinator knows producer 9000
	stale, staleEpoch := open("stale", 1)
	appendTxn(1, stale, staleEpoch+3, hourAgo) // the coordinator's marker would be refused
	live, liveEpoch := open("live", 2)
	appendTxn(2, live, liveEpoch, hourAgo)        // its coordinator ends it
	appendTxn(2, 9001, 0, time.Now().UnixMilli()) // open, but not for long
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	s := startServe(t, dir)
	defer s.stop(t)
	find := func(args ...string) [][]string {
		t.Helper()
		out := ok(t, "", "", append([]string{"transactions", "--bootstrap-server", s.addr, "find-hanging"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.HasPrefix(lines[0], "Topic") || !strings.HasSuffix(lines[0], "Duration(min)") {
			t.Fatalf("find-hanging %v:\n%s", args, out)
		}
		var rows [][]string
		for _, l := range lines[1:] {
			rows = append(rows, strings.Fields(l))
		}
		return rows
	}
	want := [][]string{
		{"t", "0", "9000", "0", "-1", "0"},
		{"t", "1", strconv.FormatInt(stale, 10), strconv.Itoa(int(staleEpoch + 3)), "-1", "0"},
	}
	check := func(rows, want [][]string, args ...string) {
		t.Helper()
		if len(rows) != len(want) {
			t.Fatalf("find-hanging %v: %v, want %v", args, rows, want)
		}
		for i, r := range rows {
			if mins, err := strconv.Atoi(r[7]); !slices.Equal(r[:6], want[i]) || r[6] != strconv.FormatInt(hourAgo, 10) || err != nil || mins < 60 || mins > 70 {
				t.Fatalf("find-hanging %v: row %v, want %v, last timestamp %d, 60 min", args, r, want[i], hourAgo)
			}
		}
	}
	check(find("--topic", "t"), want, "--topic t")
	check(find("--broker-id", "1"), want, "--broker-id 1")
	check(find("--topic", "t", "--partition", "1"), want[1:], "--partition 1")
	check(find("--topic", "t", "--partition", "2"), nil, "--partition 2")
	check(find("--broker-id", "2"), nil, "--broker-id 2")
	check(find("--topic", "t", "--max-transaction-timeout", "120"), nil, "--max-transaction-timeout 120")

	ok(t, "", "", "transactions", "--bootstrap-server", s.addr, "abort", "--topic", "t", "--partition", "0", "--start-offset", "0")
	check(find("--topic", "t"), want[1:], "after the abort")

	for _, bad := range [][]string{
		{"find-hanging"},
		{"find-hanging", "--partition", "0"},
		{"find-hanging", "--topic", "t", "--max-transaction-timeout", "0"},
	} {
		if r := strata(t, "", "", append([]string{"transactions", "--bootstrap-server", s.addr}, bad...)...); r.code != exitUsage {
			t.Errorf("transactions %v: exit %d, want usage (%d): %s", bad, r.code, exitUsage, r.stderr)
		}
	}
	if r := strata(t, "", "", "transactions", "--bootstrap-server", s.addr, "find-hanging", "--topic", "t", "--partition", "7"); r.code == 0 || !strings.Contains(r.stderr, "no partition 7") {
		t.Errorf("find-hanging of a partition that does not exist: exit %d: %s", r.code, r.stderr)
	}
}

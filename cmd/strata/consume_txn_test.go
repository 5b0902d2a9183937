package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/log"
)

// txnDataDir writes to topic t of a new data dir a committed transaction
// (c1, c2), an aborted one (a1, a2, a3), a committed one (c3) and an open
// one (o1), with a transactional Producer, and returns the dir.
func txnDataDir(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic("t", log.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := log.NewProducer(b, log.ProducerConfig{TransactionalID: "cli", Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	txn := func(end func(context.Context) error, vals ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if _, err := p.Send(ctx, log.Record{Topic: "t", Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		if end != nil {
			if err := end(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn(p.CommitTransaction, "c1", "c2")
	txn(p.AbortTransaction, "a1", "a2", "a3")
	txn(p.CommitTransaction, "c3")
	txn(nil, "o1") // left open: the broker closes with it ongoing
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// consume --isolation-level read_committed (or isolation.level in
// --consumer.config) prints only committed transactions' records, up to
// the last stable offset, and exits there (an open transaction holds it
// back); read_uncommitted, the default as Kafka's, prints every record;
// another level is a usage error that reads nothing.
func TestConsumeIsolationLevel(t *testing.T) {
	dir := txnDataDir(t)
	lines := func(out string) []string { return strings.Fields(out) }
	all := lines(ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning"))
	if want := []string{"c1", "c2", "a1", "a2", "a3", "c3", "o1"}; !slices.Equal(all, want) {
		t.Errorf("read_uncommitted (default): %q, want %q", all, want)
	}
	if got := lines(ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning", "--isolation-level", "read_uncommitted")); !slices.Equal(got, all) {
		t.Errorf("--isolation-level read_uncommitted: %q, want %q", got, all)
	}
	want := []string{"c1", "c2", "c3"}
	if got := lines(ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning", "--isolation-level", "read_committed")); !slices.Equal(got, want) {
		t.Errorf("--isolation-level read_committed: %q, want %q", got, want)
	}
	cfg := writeFile(t, "consumer.properties", "isolation.level=read_committed\n")
	if got := lines(ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning", "--consumer.config", cfg)); !slices.Equal(got, want) {
		t.Errorf("isolation.level=read_committed: %q, want %q", got, want)
	}
	r := strata(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning", "--isolation-level", "read-committed")
	if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "want read_uncommitted or read_committed") {
		t.Errorf("a bad level: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

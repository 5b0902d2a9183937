package main

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

// TestShareGroupsDataDir: a share group's start offset, lag, in-flight
// records and delivery counts, read from a stopped data dir, after a
// member accepted 0-3, rejected 4, released 5 and closed holding 6-9.
func TestShareGroupsDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.CreateTopic("t", log.TopicConfig{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tp.Partition(0)
	for range 10 {
		if _, err := p.Append(log.Record{Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}); err != nil {
		t.Fatal(err)
	}
	c, err := log.NewShareConsumer(b, log.ShareConsumerConfig{Group: "g", Topics: []string{"t"}, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var recs []log.ShareRecord
	for len(recs) == 0 {
		if recs, err = c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(recs) != 10 {
		t.Fatalf("polled %d records, want 10", len(recs))
	}
	for _, r := range recs[:4] {
		if err := r.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	if err := recs[4].Reject(); err != nil {
		t.Fatal(err)
	}
	if err := recs[5].Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "", "", "share-groups", "--data-dir", dir, "--list")
	match(t, out, `(?m)^g\s+Empty$`)
	out = ok(t, "", "", "share-groups", "--data-dir", dir, "--describe", "--all-groups")
	match(t, out, `(?m)^g\s+Empty\s+\d+\s+0$`)
	match(t, out, `(?m)^g\s+t\s+0\s+5\s+5\s+5/0/0/0\s+5-9:Available×1$`)
}

// TestShareGroupsServe: over the Kafka protocol, a member joined with
// ShareGroupHeartbeat is listed with its assignment, and the
// share-partition with its start offset; bad usage exits 2.
func TestShareGroupsServe(t *testing.T) {
	s := startServe(t, filepath.Join(t.TempDir(), "data"))
	defer s.stop(t)
	ok(t, "", "", "topics", "--bootstrap-server", s.addr, "create", "--topic", "t")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{s.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "g", "member-one", 0, []string{"t"}
	resp, err := c.Request(ctx, req, 1)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode; code != 0 {
		t.Fatalf("ShareGroupHeartbeat: code %d", code)
	}
	out := ok(t, "", "", "share-groups", "--bootstrap-server", s.addr, "--list")
	match(t, out, `(?m)^g\s+Stable$`)
	out = ok(t, "", "", "share-groups", "--bootstrap-server", s.addr, "--describe", "--group", "g")
	match(t, out, `(?m)^g\s+member-one\s+\S+\s+\S+\s+\d+\s+t\(0\)$`)
	match(t, out, `(?m)^g\s+t\s+0\s+0\s+\S+\s+-\s+-$`)

	for _, args := range [][]string{
		{"--list", "--describe"},
		{"--describe"},
		{"--list", "--group", "g"},
		{"--describe", "--group", "g", "--all-groups"},
	} {
		if r := strata(t, "", "", append([]string{"share-groups", "--bootstrap-server", s.addr}, args...)...); r.code != exitUsage {
			t.Fatalf("share-groups %v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}

func match(t *testing.T, out, re string) {
	t.Helper()
	if !regexp.MustCompile(re).MatchString(out) {
		t.Fatalf("no line matches %s in:\n%s", re, out)
	}
}

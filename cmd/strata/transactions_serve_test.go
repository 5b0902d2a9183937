package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
)

// TestTxnOverride: the transaction coordinator's settings set log.Config;
// a bad value says what it wants.
func TestTxnOverride(t *testing.T) {
	var c serveConfig
	for _, kv := range []string{"transaction.max.timeout.ms=120000", "transactional.id.expiration.ms=3600000",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=500"} {
		if err := c.override(kv); err != nil {
			t.Fatal(err)
		}
	}
	if c.broker.TransactionMaxTimeout != 2*time.Minute || c.broker.TransactionalIDExpiration != time.Hour ||
		c.broker.TransactionAbortTimedOutInterval != 500*time.Millisecond {
		t.Fatalf("config: %+v", c.broker)
	}
	for _, bad := range []string{"0", "-1", "1s", "", "2147483648"} {
		err := c.override("transaction.max.timeout.ms=" + bad)
		if err == nil || !strings.Contains(err.Error(), "want ms") {
			t.Fatalf("transaction.max.timeout.ms=%q: %v", bad, err)
		}
	}
	for v, want := range map[string]int16{"0": -1, "1": 1, "2": 2} { // kafka.Config's 0 is 2
		if err := c.override("transaction.version=" + v); err != nil || c.server.TransactionVersion != want || c.broker.TransactionVersion != want {
			t.Fatalf("transaction.version=%s: %v, TransactionVersion %d, want %d", v, err, c.server.TransactionVersion, want)
		}
	}
	for _, bad := range []string{"3", "-1", "two", ""} {
		if err := c.override("transaction.version=" + bad); err == nil || !strings.Contains(err.Error(), "want 0, 1 or 2") {
			t.Fatalf("transaction.version=%q: %v", bad, err)
		}
	}
	if err := c.override("transaction.bogus.ms=1"); err == nil || !strings.Contains(err.Error(), "transactional.id.expiration.ms") {
		t.Fatalf("an unknown key lists the known ones: %v", err)
	}
	// A cluster member takes them all (its Kafka servers' feature, its
	// transaction coordinators' timeouts), and nothing else of the kind.
	for _, kv := range []string{"transaction.version=0", "transaction.max.timeout.ms=1000",
		"transactional.id.expiration.ms=1000", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"} {
		if n := clusterOverrides([]string{kv}); n != 0 {
			t.Fatalf("a cluster member refuses %s: %d", kv, n)
		}
	}
	if n := clusterOverrides([]string{"transaction.bogus.ms=1000"}); n != 1 {
		t.Fatalf("a cluster member takes transaction.bogus.ms: %d", n)
	}
}

// txnConfigs returns the transaction settings DescribeConfigs shows of
// broker node at addr: value and source by name.
func txnConfigs(t *testing.T, addr, node string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, node
	rr.ConfigNames = []string{"transaction.max.timeout.ms", "transactional.id.expiration.ms"}
	req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
	resp, err := c.Request(ctx, req, 4)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rc := range resp.(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		got[rc.Name] = *rc.Value + " " + rc.Source.String()
	}
	return got
}

// A cluster member started with --override transaction.max.timeout.ms
// (and the other coordinator timeouts) has its transaction coordinators
// take it: DescribeConfigs of the member shows it. A one-voter cluster.
func TestServeClusterTxnOverride(t *testing.T) {
	ports := freePorts(t, 2)
	s := startServe(t, filepath.Join(t.TempDir(), "1"), "--node-id", "1", "--listen", ports[0], "--raft-addr", ports[1],
		"--raft-loopback", "--peer", "1="+ports[0]+","+ports[1], "--override", "transaction.max.timeout.ms=120000")
	defer s.stop(t)
	got := txnConfigs(t, ports[0], "1")
	if got["transaction.max.timeout.ms"] != "120000 STATIC_BROKER_CONFIG" || got["transactional.id.expiration.ms"] != "604800000 DEFAULT_CONFIG" {
		t.Fatalf("DescribeConfigs: %v", got)
	}
}

// strata serve --override transaction.max.timeout.ms: DescribeConfigs of
// the broker shows it, and InitProducerId refuses a longer timeout.
func TestServeTxnOverride(t *testing.T) {
	s := startServe(t, filepath.Join(t.TempDir(), "data"), "--override", "transaction.max.timeout.ms=120000")
	defer s.stop(t)
	got := txnConfigs(t, s.addr, "1")
	if got["transaction.max.timeout.ms"] != "120000 STATIC_BROKER_CONFIG" || got["transactional.id.expiration.ms"] != "604800000 DEFAULT_CONFIG" {
		t.Fatalf("DescribeConfigs: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{s.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = kmsg.StringPtr("long"), 180000
	iresp, err := c.Request(ctx, ireq, 4)
	if err != nil {
		t.Fatal(err)
	}
	if code := iresp.(*kmsg.InitProducerIDResponse).ErrorCode; code != 50 { // INVALID_TRANSACTION_TIMEOUT
		t.Fatalf("InitProducerId with 180000 ms: code %d, want 50", code)
	}
}

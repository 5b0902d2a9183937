package main

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/segment/batch"
)

// strata transactions against strata serve: an open transaction is
// listed, described, its producer described with the transaction's first
// offset, and aborted in its partition by that offset (the LSO then moves
// past it, which describe-producers shows as no open transaction).
func TestTransactionsCommand(t *testing.T) {
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
	do := func(req kmsg.Request, v int16) kmsg.Response {
		t.Helper()
		resp, err := c.Request(ctx, req, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	produce := func(id *string, pid int64, epoch int16, transactional bool) {
		t.Helper()
		var bd batch.Builder
		now := time.Now().UnixMilli()
		bd.Reset(now)
		if pid >= 0 {
			bd.SetProducer(pid, epoch, 0)
		}
		bd.Append(now, nil, []byte("v"), nil)
		recs := slices.Clone(bd.Bytes())
		if transactional {
			recs[22] |= 0x10
			batch.SetCRC(recs)
		}
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = id, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recs
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		if code := do(req, 9).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
	produce(nil, -1, -1, false) // offset 0: the transaction starts at 1
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = kmsg.StringPtr("hang"), 600000
	init := do(ireq, 4).(*kmsg.InitProducerIDResponse)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %d", init.ErrorCode)
	}
	areq := kmsg.NewPtrAddPartitionsToTxnRequest()
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch = "hang", init.ProducerID, init.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	areq.Topics = []kmsg.AddPartitionsToTxnRequestTopic{at}
	if code := do(areq, 3).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", code)
	}
	produce(kmsg.StringPtr("hang"), init.ProducerID, init.ProducerEpoch, true)
	pid := strconv.FormatInt(init.ProducerID, 10)

	txns := func(args ...string) string {
		t.Helper()
		return ok(t, "", "", append([]string{"transactions", "--bootstrap-server", s.addr}, args...)...)
	}
	fieldsOf := func(out string) [][]string {
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			rows = append(rows, strings.Fields(l))
		}
		return rows
	}
	out := txns("list")
	if !strings.HasPrefix(out, "TransactionalId") || !slices.Equal(fieldsOf(out)[0][2:], []string{pid, "Ongoing"}) || fieldsOf(out)[0][0] != "hang" {
		t.Fatalf("list:\n%s", out)
	}
	if out := txns("list", "--transactional-id-pattern", "other.*"); len(fieldsOf(out)) != 0 {
		t.Fatalf("list by pattern:\n%s", out)
	}
	out = txns("describe", "--transactional-id", "hang")
	row := fieldsOf(out)[0]
	if row[1] != "hang" || row[2] != pid || row[4] != "Ongoing" || row[5] != "600000" || row[len(row)-1] != "t-0" {
		t.Fatalf("describe:\n%s", out)
	}
	out = txns("describe-producers", "--topic", "t", "--partition", "0")
	row = fieldsOf(out)[0]
	if row[0] != pid || row[len(row)-1] != "1" {
		t.Fatalf("describe-producers:\n%s", out)
	}

	txns("abort", "--topic", "t", "--partition", "0", "--start-offset", "1")
	out = txns("describe-producers", "--topic", "t", "--partition", "0")
	if row := fieldsOf(out)[0]; row[len(row)-1] != "-1" {
		t.Fatalf("after abort, describe-producers:\n%s", out)
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.IsolationLevel = 1 // read_committed: the LSO
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{lp}
	lreq.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	if lso := do(lreq, 4).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset; lso != 3 {
		t.Fatalf("LSO after the abort: %d, want 3 (record, transactional record, marker)", lso)
	}

	run := func(args ...string) result {
		return strata(t, "", "", append([]string{"transactions", "--bootstrap-server", s.addr}, args...)...)
	}
	if r := run("abort", "--topic", "t", "--partition", "0", "--start-offset", "1"); r.code == 0 || !strings.Contains(r.stderr, "no open transaction starts at offset 1") {
		t.Errorf("a second abort: exit %d: %s", r.code, r.stderr)
	}
	if r := run("describe", "--transactional-id", "nobody"); r.code == 0 || !strings.Contains(r.stderr, "105") {
		t.Errorf("describe an unknown id: exit %d: %s", r.code, r.stderr)
	}
	for _, bad := range [][]string{
		{},
		{"bogus"},
		{"describe"},
		{"describe-producers", "--topic", "t"},
		{"abort", "--topic", "t", "--partition", "0"},
		{"abort", "--topic", "t", "--partition", "0", "--start-offset", "1", "--producer-id", "5", "--producer-epoch", "0", "--coordinator-epoch", "0"},
		{"abort", "--topic", "t", "--partition", "0", "--producer-id", "5"},
	} {
		if r := run(bad...); r.code != exitUsage {
			t.Errorf("transactions %v: exit %d, want usage (%d): %s", bad, r.code, exitUsage, r.stderr)
		}
	}
}

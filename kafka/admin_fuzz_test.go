package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminSeedRequests are kmsg-encoded admin requests at every version
// served, each a frame without its size.
func adminSeedRequests() [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	add := func(req kmsg.Request, max int16) {
		for v := int16(0); v <= max; v++ {
			req.SetVersion(v)
			out = append(out, f.AppendRequest(nil, req, int32(len(out)))[4:])
		}
	}
	cp := createPartitionsReq(0, false, growTo("t", 3), growTo("missing", 2))
	add(cp, 3)
	add(alterReq(0, false,
		alterOps(kmsg.ConfigResourceTypeTopic, "t", kmsg.IncrementalAlterConfigOpSet, "retention.ms", "1000",
			kmsg.IncrementalAlterConfigOpAppend, "cleanup.policy", "compact"),
		alterOps(kmsg.ConfigResourceTypeBroker, "1", kmsg.IncrementalAlterConfigOpDelete, "x", "<nil>")), 1)
	add(deleteRecordsReq(0, "t", map[int32]int64{0: 0, 1: -1}), 2)
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch, op.LeaderEpoch = 0, 0
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	add(oe, 4)
	return out
}

// FuzzAdminRequest decodes a frame as the server does and handles it
// against an in-memory broker, as FuzzRequest does, seeded with the admin
// APIs: nothing panics, every request gets a response. The changes they
// make are validated only (CreatePartitions and IncrementalAlterConfigs)
// so that the broker does not fill up.
func FuzzAdminRequest(f *testing.F) {
	for _, s := range adminSeedRequests() {
		f.Add(s)
	}
	b := logtest.New(f, logtest.InMemory(), logtest.Topic("t", 2))
	s, err := Listen("127.0.0.1:0", b, Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, a, req, err := s.decode(frame)
		if err != nil {
			return
		}
		switch r := req.(type) {
		case *kmsg.CreatePartitionsRequest:
			r.ValidateOnly = true
		case *kmsg.IncrementalAlterConfigsRequest:
			r.ValidateOnly = true
		case *kmsg.FetchRequest:
			r.MaxWaitMillis = min(r.MaxWaitMillis, 2)
		case *kmsg.CreateTopicsRequest:
			r.ValidateOnly = true
		case *kmsg.DeleteTopicsRequest:
			return
		}
		c := newConn(s, nopConn{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p := &pending{h: h}
		rep := a.handle(ctx, c, req)
		c.encode(p, rep)
		if p.out == nil && !rep.none {
			t.Fatalf("no response to %s", kmsg.NameForKey(h.key))
		}
	})
}

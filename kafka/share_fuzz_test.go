package kafka

import (
	"bufio"
	"fmt"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// FuzzShareFetch sends share fetches and acknowledgements with hostile
// fields (session epochs, acknowledgement batches and types, record
// limits, renew flags, acquire modes) to a live server over one
// connection: each gets a response that decodes, acquired ranges lie
// inside the log, a fetch of an unknown ShareAcquireMode is
// INVALID_REQUEST and acquires nothing, one of record_limit acquires at
// most MaxRecords, and the server keeps serving.
func FuzzShareFetch(f *testing.F) {
	f.Add(int16(2), "m", int32(0), []byte{}, int32(5), false, false, int8(0))
	f.Add(int16(2), "m", int32(1), []byte{0, 3, 1, 4, 2, 2}, int32(0), false, false, int8(0))
	f.Add(int16(1), "m", int32(-1), []byte{9, 1, 1}, int32(-3), true, true, int8(0))
	f.Add(int16(2), "", int32(7), []byte{5, 0, 4}, int32(1<<30), true, false, int8(0))
	// KIP-1206's ShareAcquireMode (v2): record_limit, and garbage.
	f.Add(int16(1), "m", int32(0), []byte{}, int32(3), false, false, int8(1))
	f.Add(int16(1), "m", int32(1), []byte{0, 2, 1}, int32(2), false, false, int8(1))
	f.Add(int16(1), "m", int32(2), []byte{3, 4, 2}, int32(1), false, false, int8(2))
	f.Add(int16(1), "m", int32(0), []byte{}, int32(0), false, false, int8(-128))
	var recs []log.Record
	for i := range 20 {
		recs = append(recs, log.Record{Value: fmt.Appendf(nil, "r%d", i)})
	}
	b := logtest.New(f, logtest.InMemory(), logtest.Topic("t", 1), logtest.Seed("t", recs...))
	s, err := Listen("127.0.0.1:0", b, Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { nc.Close() })
	shared := &testClient{nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))}
	f.Fuzz(func(t *testing.T, v int16, member string, epoch int32, acks []byte, maxRecords int32, renew, viaAck bool, mode int8) {
		c := shared
		c.t = t
		hb := shareHeartbeat(member, 0, "t")
		c.do(hb)
		var batches []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		for i := 0; i+2 < len(acks); i += 3 {
			batches = append(batches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
				FirstOffset: int64(int8(acks[i])), LastOffset: int64(int8(acks[i])) + int64(acks[i+1]%30), AcknowledgeTypes: []int8{int8(acks[i+2] % 7)},
			})
		}
		if viaAck {
			req := kmsg.NewPtrShareAcknowledgeRequest()
			req.SetVersion(1 + v&1)
			req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = kmsg.StringPtr("g"), &member, epoch, renew
			at := kmsg.ShareAcknowledgeRequestTopic{TopicID: topicID("t")}
			ap := kmsg.ShareAcknowledgeRequestTopicPartition{}
			for _, b := range batches {
				ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch(b))
			}
			at.Partitions = append(at.Partitions, ap)
			req.Topics = append(req.Topics, at)
			c.do(req)
			return
		}
		req := shareFetch(member, epoch, maxRecords, 0)
		req.SetVersion(1 + v&1)
		req.IsRenewAck = renew
		req.ShareAcquireMode = mode // sent at v2 only
		req.Topics[0].Partitions[0].AcknowledgementBatches = batches
		resp := c.do(req).(*kmsg.ShareFetchResponse)
		n := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				for _, a := range rp.AcquiredRecords {
					if a.FirstOffset < 0 || a.LastOffset >= 20 || a.FirstOffset > a.LastOffset || a.DeliveryCount < 1 {
						t.Fatalf("acquired %+v", a)
					}
					n += int(a.LastOffset - a.FirstOffset + 1)
				}
			}
		}
		if req.Version < 2 {
			return
		}
		switch {
		case mode != 0 && mode != shareAcquireRecordLimit:
			if resp.ErrorCode != errInvalidRequest || n > 0 {
				t.Fatalf("ShareAcquireMode %d: code %d, %d acquired", mode, resp.ErrorCode, n)
			}
		case mode == shareAcquireRecordLimit && maxRecords > 0 && n > int(maxRecords):
			t.Fatalf("record_limit: %d acquired, MaxRecords %d", n, maxRecords)
		}
	})
}

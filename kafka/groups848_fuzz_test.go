package kafka

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log/logtest"
)

// FuzzConsumerGroupHeartbeat sends heartbeats with hostile fields to a
// live server, one group for every input: each gets a response that
// decodes, with a Kafka error code or an assignment of partitions that
// exist, and the server keeps serving.
func FuzzConsumerGroupHeartbeat(f *testing.F) {
	f.Add(int16(1), "m", int32(0), "", "t,u", false, "", []byte{}, "", int32(30000))
	f.Add(int16(0), "", int32(0), "i", "", true, "t.*", []byte{0, 1}, "range", int32(-1))
	f.Add(int16(1), "m", int32(3), "", "", false, "", []byte{0, 9, 200}, "uniform", int32(-1))
	f.Add(int16(1), "m", int32(-2), "i", "", false, "", []byte{}, "", int32(-1))
	f.Add(int16(1), "m", int32(0), "", "", true, "(?<n>x)|[", []byte{}, "sticky", int32(5))
	b := logtest.New(f, logtest.InMemory(), logtest.Topic("t", 4))
	gc, err := group.New(group.Config{Partitions: func(t string) (int, error) { return b.Partitions(context.Background(), t) }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { gc.Close() })
	s, err := Listen("127.0.0.1:0", shortSessions{b, gc}, Config{})
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
	f.Fuzz(func(t *testing.T, v int16, member string, epoch int32, instance, topics string, useRegex bool, regex string,
		owned []byte, assignor string, rebalance int32) {
		c := shared
		c.t = t // one connection for every input: a request never breaks it
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(v & 1)
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "fuzz", member, epoch, rebalance
		if instance != "" {
			req.InstanceID = &instance
		}
		if topics != "" {
			req.SubscribedTopicNames = strings.Split(topics, ",")
		}
		if useRegex {
			req.SubscribedTopicRegex = &regex
		}
		if assignor != "" {
			req.ServerAssignor = &assignor
		}
		if len(owned) > 0 {
			tp := kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID("t")}
			for _, p := range owned[1:] {
				tp.Partitions = append(tp.Partitions, int32(int8(p)))
			}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{tp}
			if owned[0]%2 == 1 {
				req.Topics[0].TopicID[0]++ // an unknown topic id
			}
		}
		resp := c.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
		switch resp.ErrorCode {
		case errNone:
			if resp.Assignment != nil {
				for _, at := range resp.Assignment.Topics {
					if at.TopicID != topicID("t") {
						t.Fatalf("assigned topic id %x", at.TopicID)
					}
					for _, p := range at.Partitions {
						if p < 0 || p >= 4 {
							t.Fatalf("assigned partition %d of 4", p)
						}
					}
				}
			}
		case errInvalidRequest, errUnknownMemberID, errFencedInstanceID, errGroupIDNotFound,
			110, 111, 112, 128: // FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION
		default:
			t.Fatalf("error code %d (%v) for %+v", resp.ErrorCode, resp.ErrorMessage, req)
		}
		// The group leaves nothing behind that stops the next input.
		if resp.ErrorCode == errNone && resp.MemberID != nil && req.MemberEpoch >= 0 {
			leave := cgHeartbeatReq(1, "fuzz", *resp.MemberID, -1)
			leave.InstanceID = req.InstanceID
			c.do(leave)
		}
	})
}

package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedRequests are kmsg-encoded requests of every served API at a few
// versions, each a whole frame (size included).
func seedRequests() [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	add := func(req kmsg.Request, versions ...int16) {
		for _, v := range versions {
			req.SetVersion(v)
			out = append(out, f.AppendRequest(nil, req, int32(len(out))))
		}
	}
	add(kmsg.NewPtrApiVersionsRequest(), 0, 3)
	meta := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	meta.Topics = append(meta.Topics, rt)
	add(meta, 0, 4, 9, 12)
	add(produceReq(3, -1, "t", 0, records("a", "b")), 3, 7, 9, 13)
	add(produceReq(3, 0, "t", 0, records("a")), 8)
	add(fetchReq(4, "t", 0, 0, 0), 4, 11, 12, 13, 16)
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	add(lo, 1, 6)
	add(createReq(0, false, newTopic("n", 1, 1, "retention.ms", "1")), 0, 5, 7)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"n"}
	add(del, 0, 4)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	dc.Resources = append(dc.Resources, dr)
	add(dc, 0, 4)
	add(kmsg.NewPtrDescribeClusterRequest(), 0, 1)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g", "h"}
	add(fc, 0, 3, 4, 6)
	add(joinReq(0, "g", "", time.Second, time.Second, "t"), 0, 3, 4, 5, 6, 9)
	add(syncReq(0, "g", "m", 1, map[string][]log.TopicPartition{"m": {{Topic: "t"}}}), 0, 3, 4, 5)
	add(heartbeatReq(0, "g", "m", 1), 0, 3, 4)
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = "g", "m"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = "m", kmsg.StringPtr("i")
	lv.Members = append(lv.Members, lm)
	add(lv, 0, 3, 5)
	add(commitReq(0, "g", "", -1, "t", 1, 2), 0, 1, 2, 5, 7, 8, 9)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g"
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic, ot.Partitions = "t", []int32{0, 1}
	of.Topics = append(of.Topics, ot)
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "g"
	of.Groups = append(of.Groups, og)
	add(of, 0, 1, 5, 7, 8, 9)
	lg := kmsg.NewPtrListGroupsRequest()
	lg.StatesFilter, lg.TypesFilter = []string{"Stable"}, []string{"classic"}
	add(lg, 0, 3, 4, 5)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g", ""}, true
	add(dg, 0, 3, 5, 6)
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Groups = []string{"g", "nothing"}
	add(dl, 0, 2)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	add(hs, 0, 1)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = []byte("\x00user\x00pass")
	add(au, 0, 2)
	describeSeeds(add) // describe_fuzz_test.go
	return out
}

// FuzzReadFrame: the frame reader and header parser never panic, and a
// frame read is exactly as long as it says.
func FuzzReadFrame(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 10, 0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		frame, _, err := readFrame(bytes.NewReader(b), nil, 1<<16, nil)
		if err != nil {
			return
		}
		if want := int(binary.BigEndian.Uint32(b)); len(frame) != want {
			t.Fatalf("frame of %d bytes, size says %d", len(frame), want)
		}
		h, rest, err := parseHeader(frame)
		if err != nil {
			return
		}
		if _, err := skipHeaderTags(h, rest); err != nil {
			return
		}
	})
}

// FuzzRequest decodes a frame as the server does and, if it decodes,
// handles it against an in-memory broker and encodes the response: nothing
// may panic (a handler's panic is recovered by the server, so it is
// reported here as a failure).
func FuzzRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s[4:])
	}
	b := logtest.New(f, logtest.InMemory(), logtest.Topic("t", 2))
	s, err := Listen("127.0.0.1:0", b, Config{SASL: &SASLConfig{Plain: func(string) (string, bool) { return "pass", true }}})
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
		case *kmsg.FetchRequest:
			r.MaxWaitMillis = min(r.MaxWaitMillis, 2) // no long polls here
		case *kmsg.CreateTopicsRequest:
			r.ValidateOnly = true // the broker would fill up
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

// nopConn is the connection of requests handled without one.
type nopConn struct{ net.Conn }

func (nopConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// FuzzClientResponse: the client's response decoding never panics on what
// a broker sends. The first byte picks the request the bytes answer.
func FuzzClientResponse(f *testing.F) {
	reqs := []kmsg.Request{
		kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(),
		kmsg.NewPtrFetchRequest(), kmsg.NewPtrListOffsetsRequest(), kmsg.NewPtrSASLHandshakeRequest(),
		kmsg.NewPtrSASLAuthenticateRequest(), kmsg.NewPtrFindCoordinatorRequest(), kmsg.NewPtrJoinGroupRequest(),
		kmsg.NewPtrSyncGroupRequest(), kmsg.NewPtrHeartbeatRequest(), kmsg.NewPtrLeaveGroupRequest(),
		kmsg.NewPtrOffsetCommitRequest(), kmsg.NewPtrOffsetFetchRequest(),
	}
	versions := []int16{3, 12, 12, 12, 6, 1, 2, 4, 9, 5, 4, 5, 9, 9}
	for i, r := range reqs {
		r.SetVersion(versions[i])
		resp := r.ResponseKind()
		resp.SetVersion(versions[i])
		body := resp.AppendTo(nil)
		if r.IsFlexible() && r.Key() != apiVersionsKey {
			body = append([]byte{0}, body...)
		}
		f.Add(append([]byte{byte(i)}, body...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		i := int(b[0]) % len(reqs)
		req := kmsg.RequestForKey(reqs[i].Key())
		req.SetVersion(versions[i])
		decodeResponse(req, b[1:])
	})
}

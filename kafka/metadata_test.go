package kafka

import (
	"testing"
	"time"

	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataFor(v int16, allow bool, names ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(v)
	req.AllowAutoTopicCreation = allow
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestAutoCreateTopics(t *testing.T) {
	s, b, _ := start(t, Config{AutoCreateTopics: true})
	c := dial(t, s.Addr())
	resp := c.do(metadataFor(9, false, "a")).(*kmsg.MetadataResponse)
	require.Equal(t, errUnknownTopicOrPartition, resp.Topics[0].ErrorCode, "the client did not allow it")
	resp = c.do(metadataFor(9, true, "a", "bad/name")).(*kmsg.MetadataResponse)
	require.Equal(t, errNone, resp.Topics[0].ErrorCode)
	require.Len(t, resp.Topics[0].Partitions, 1)
	require.Equal(t, errInvalidTopicException, resp.Topics[1].ErrorCode)
	resp = c.do(metadataFor(3, false, "b")).(*kmsg.MetadataResponse)
	require.Equal(t, errNone, resp.Topics[0].ErrorCode, "v3 always allows")
	require.Equal(t, []string{"a", "b"}, b.Topics())

	off, _, _ := start(t, Config{})
	c = dial(t, off.Addr())
	resp = c.do(metadataFor(9, true, "a")).(*kmsg.MetadataResponse)
	require.Equal(t, errUnknownTopicOrPartition, resp.Topics[0].ErrorCode, "off by default")
}

// A client that goes away ends its parked fetches at once: the connection
// is forgotten (its writer waits for every handler) long before MaxWait.
func TestDisconnectEndsParkedFetch(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	c.do(metadataV9())
	c.send(fetchReq(12, "t", 0, 0, time.Minute))
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for cn := range s.conns {
			if cn.inFlight.Load() == 1 {
				return true
			}
		}
		return false
	})
	c.nc.Close()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 0
	})
}

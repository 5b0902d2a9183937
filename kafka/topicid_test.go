package kafka

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// TestTopicIDs: Produce and Fetch v13+ find topics by id through the
// server's cache, which learns topics created after it was filled and
// forgets none wrongly: a deleted topic's id is UNKNOWN_TOPIC_ID, and the
// same id again once the topic is created again (ids follow names).
func TestTopicIDs(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("a", 1))
	c := dial(t, s.Addr())
	produce := func(topic string) int16 {
		return c.do(produceReq(13, -1, topic, 0, records("x"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(topic string) int16 {
		return c.do(fetchReq(16, topic, 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, errNone, produce("a"))
	require.Equal(t, errNone, fetch("a"))
	require.Equal(t, errUnknownTopicID, produce("b"), "no topic b yet")

	_, err := b.CreateTopic("b", log.TopicConfig{})
	require.NoError(t, err)
	require.Equal(t, errNone, produce("b"), "a topic created after the cache was filled")
	require.Equal(t, errNone, fetch("b"))

	require.NoError(t, b.DeleteTopic("b"))
	require.Equal(t, errUnknownTopicID, produce("b"), "a deleted topic's id is unknown")
	require.Equal(t, errUnknownTopicID, fetch("b"))

	_, err = b.CreateTopic("b", log.TopicConfig{})
	require.NoError(t, err)
	require.Equal(t, errNone, produce("b"), "and known again with the topic")
}

// BenchmarkTopicName: finding a topic by id among 1,000 (Produce and Fetch
// v13+ do it for each topic of each request).
func BenchmarkTopicName(b *testing.B) {
	lb := logtest.New(b, logtest.InMemory())
	for i := range 1000 {
		if _, err := lb.CreateTopic(fmt.Sprintf("topic-%04d", i), log.TopicConfig{MaxIndexBytes: 4096}); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Listen("127.0.0.1:0", lb, Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	id := topicID("topic-0500")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.topicName(id); !ok {
			b.Fatal("not found")
		}
	}
}

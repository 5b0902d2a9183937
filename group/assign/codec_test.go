package assign

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/tp"
)

func TestSubscriptionRoundTrip(t *testing.T) {
	b := EncodeSubscription([]string{"a", "b"})
	// Kafka's bytes: version 0, [2]{"a", "b"}, null user data.
	require.Equal(t, []byte{0, 0, 0, 0, 0, 2, 0, 1, 'a', 0, 1, 'b', 0xff, 0xff, 0xff, 0xff}, b)
	got, err := DecodeSubscription(b)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, got)

	// A later version (as the Java client and kgo send it) decodes too.
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 3
	m.Topics = []string{"x"}
	m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "x", Partitions: []int32{0}}}
	m.Generation = 4
	got, err = DecodeSubscription(m.AppendTo(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, got)

	_, err = DecodeSubscription([]byte{0, 0, 0, 0, 0, 9})
	require.ErrorIs(t, err, ErrMalformed)
}

func TestAssignmentRoundTrip(t *testing.T) {
	in := []tp.TopicPartition{{Topic: "b", Partition: 1}, {Topic: "a", Partition: 0}, {Topic: "b", Partition: 0}}
	b := EncodeAssignment(in)
	var a kmsg.ConsumerMemberAssignment
	require.NoError(t, a.ReadFrom(b))
	require.Equal(t, []kmsg.ConsumerMemberAssignmentTopic{{Topic: "b", Partitions: []int32{1, 0}}, {Topic: "a", Partitions: []int32{0}}}, a.Topics)
	got, err := DecodeAssignment(b)
	require.NoError(t, err)
	require.Equal(t, []tp.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 0}, {Topic: "b", Partition: 1}}, got)

	got, err = DecodeAssignment(nil)
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = DecodeAssignment([]byte{0, 0, 0, 0, 0, 1})
	require.ErrorIs(t, err, ErrMalformed)
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{-1}}}
	_, err = DecodeAssignment(a.AppendTo(nil))
	require.ErrorIs(t, err, ErrMalformed)
}

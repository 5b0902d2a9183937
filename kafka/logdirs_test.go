package kafka

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func logDirsReq(v int16, topics map[string][]int32) *kmsg.DescribeLogDirsRequest {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(v)
	if topics != nil {
		req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
		for name, ps := range topics {
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = name, ps
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

// sizes is a directory's partitions, "topic/partition" to size.
func sizes(d kmsg.DescribeLogDirsResponseDir) map[string]int64 {
	out := map[string]int64{}
	for _, t := range d.Topics {
		for _, p := range t.Partitions {
			out[t.Topic+"/"+string(rune('0'+p.Partition))] = p.Size
		}
	}
	return out
}

func TestDescribeLogDirs(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("a", 2), logtest.Topic("b", 1))
	c := dial(t, s.Addr())
	require.Equal(t, errNone, c.do(produceReq(9, -1, "a", 1, records("x", "y"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	p, err := b.Partition("a", 1)
	require.NoError(t, err)
	written := p.Size()
	require.Positive(t, written)
	dir, err := filepath.Abs(b.Dir())
	require.NoError(t, err)
	for v := int16(0); v <= 4; v++ {
		resp := c.do(logDirsReq(v, nil)).(*kmsg.DescribeLogDirsResponse)
		require.Equal(t, errNone, resp.ErrorCode)
		require.Len(t, resp.Dirs, 1, "v%d", v)
		d := resp.Dirs[0]
		require.Equal(t, dir, d.Dir)
		require.Equal(t, errNone, d.ErrorCode)
		got := sizes(d)
		require.Equal(t, written, got["a/1"], "v%d", v)
		require.Contains(t, got, "a/0")
		require.Contains(t, got, "b/0")
		for _, rt := range d.Topics {
			for _, rp := range rt.Partitions {
				require.Zero(t, rp.OffsetLag)
				require.False(t, rp.IsFuture)
			}
		}
		if v < 4 {
			require.Equal(t, int64(-1), d.TotalBytes)
		}
	}
	// Some partitions: only those (unknown ones are left out, as Kafka does).
	resp := c.do(logDirsReq(4, map[string][]int32{"a": {1, 1, 7, -1}, "nope": {0}})).(*kmsg.DescribeLogDirsResponse)
	require.Equal(t, map[string]int64{"a/1": written}, sizes(resp.Dirs[0]))
	// An empty list: none.
	resp = c.do(logDirsReq(4, map[string][]int32{})).(*kmsg.DescribeLogDirsResponse)
	require.Empty(t, sizes(resp.Dirs[0]))
}

// TestDescribeLogDirsVolume: a broker on disk reports its volume's bytes.
func TestDescribeLogDirsVolume(t *testing.T) {
	b := logtest.New(t, logtest.Topic("a", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	resp := dial(t, s.Addr()).do(logDirsReq(4, nil)).(*kmsg.DescribeLogDirsResponse)
	d := resp.Dirs[0]
	require.Positive(t, d.TotalBytes)
	require.Positive(t, d.UsableBytes)
	require.LessOrEqual(t, d.UsableBytes, d.TotalBytes)
}

func TestAuthorizeDescribeLogDirs(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpDescribe, acl.Cluster()))
	resp := a.as("bob").do(logDirsReq(4, nil)).(*kmsg.DescribeLogDirsResponse)
	require.Equal(t, errClusterAuthorizationFailed, resp.ErrorCode)
	require.Empty(t, resp.Dirs)
	resp = a.as("bob").do(logDirsReq(2, nil)).(*kmsg.DescribeLogDirsResponse)
	require.Empty(t, resp.Dirs)
	resp = a.as("alice").do(logDirsReq(4, nil)).(*kmsg.DescribeLogDirsResponse)
	require.Equal(t, errNone, resp.ErrorCode)
	require.Len(t, resp.Dirs, 1)
	require.Contains(t, sizes(resp.Dirs[0]), "orders/1")
}

// requestedPartitions, which DescribeLogDirs and ListPartitionReassignments
// read their topics with: null is every partition (nil), an empty list
// none (empty, not nil), else each named partition in order.
func TestRequestedPartitions(t *testing.T) {
	of := func(t kmsg.DescribeLogDirsRequestTopic) (string, []int32) { return t.Topic, t.Partitions }
	if got := requestedPartitions[kmsg.DescribeLogDirsRequestTopic](nil, of); got != nil {
		t.Errorf("null topics: %v, want nil", got)
	}
	if got := requestedPartitions([]kmsg.DescribeLogDirsRequestTopic{}, of); got == nil || len(got) != 0 {
		t.Errorf("no topics: %#v, want empty", got)
	}
	got := requestedPartitions([]kmsg.DescribeLogDirsRequestTopic{{Topic: "a", Partitions: []int32{2, 0}}, {Topic: "b"}, {Topic: "c", Partitions: []int32{1}}}, of)
	want := []log.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "a", Partition: 0}, {Topic: "c", Partition: 1}}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

package kafka

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminAPITablesKmsg: kmsg encodes every version the admin tables
// serve, and none of their keys is in another table.
func TestAdminAPITablesKmsg(t *testing.T) {
	seen := map[int16]bool{}
	for _, table := range [][]api{dataAPIs, groupAPIs, idempotenceAPIs, saslAPIs} {
		for _, a := range table {
			seen[a.key] = true
		}
	}
	for _, table := range [][]api{createPartitionsAPIs, alterConfigsAPIs, deleteRecordsAPIs, epochAPIs} {
		for _, a := range table {
			r := kmsg.RequestForKey(a.key)
			require.NotNil(t, r, "key %d", a.key)
			require.GreaterOrEqual(t, r.MaxVersion(), a.max, "%s", kmsg.NameForKey(a.key))
			require.LessOrEqual(t, a.min, a.max)
			require.LessOrEqual(t, a.key, maxAPIKey)
			require.False(t, seen[a.key], "%s twice", kmsg.NameForKey(a.key))
			seen[a.key] = true
		}
	}
}

func apiKeys(t *testing.T, c *testClient) map[int16][2]int16 {
	t.Helper()
	resp := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	require.Equal(t, errNone, resp.ErrorCode)
	keys := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return keys
}

// plainBackend is a Backend with none of the optional interfaces.
type plainBackend struct{ Backend }

// TestAdminAPIsPerBackend: the admin APIs are advertised for a backend
// that implements them, and not for one that does not (whose clients then
// never send them: an unadvertised key closes the connection).
func TestAdminAPIsPerBackend(t *testing.T) {
	s, b, _ := start(t, Config{})
	keys := apiKeys(t, dial(t, s.Addr()))
	require.Equal(t, [2]int16{0, 3}, keys[createPartitionsKey])
	require.Equal(t, [2]int16{0, 1}, keys[incrementalAlterConfigsKey])
	require.Equal(t, [2]int16{0, 2}, keys[deleteRecordsKey])
	require.Equal(t, [2]int16{0, 4}, keys[offsetForLeaderEpochKey])

	plain, err := Listen("127.0.0.1:0", plainBackend{b}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, plain.Close()) })
	c := dial(t, plain.Addr())
	keys = apiKeys(t, c)
	for _, k := range []int16{createPartitionsKey, incrementalAlterConfigsKey, deleteRecordsKey, offsetForLeaderEpochKey} {
		require.NotContains(t, keys, k, kmsg.NameForKey(k))
	}
	// DescribeConfigs still answers, every config read-only.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	req.Resources = append(req.Resources, rr)
	_, err = b.CreateTopic("t", log.TopicConfig{RetentionTime: -1})
	require.NoError(t, err)
	resp := c.do(req).(*kmsg.DescribeConfigsResponse)
	require.NotEmpty(t, resp.Resources[0].Configs)
	for _, rc := range resp.Resources[0].Configs {
		require.True(t, rc.ReadOnly, rc.Name)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	c.send(cp)
	c.closed()
}

func createPartitionsReq(v int16, validateOnly bool, topics ...kmsg.CreatePartitionsRequestTopic) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(v)
	req.TimeoutMillis, req.ValidateOnly, req.Topics = 5000, validateOnly, topics
	return req
}

func growTo(name string, count int32) kmsg.CreatePartitionsRequestTopic {
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = name, count
	return t
}

func TestCreatePartitions(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1), logtest.Topic("m", 1))
	c := dial(t, s.Addr())
	manual := growTo("m", 9)
	manual.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}
	for v := int16(0); v <= 3; v++ {
		n, err := b.Partitions(context.Background(), "t")
		require.NoError(t, err)
		// Validate only: checked, nothing created.
		resp := c.do(createPartitionsReq(v, true, growTo("t", int32(n+5)), growTo("t2", 1))).(*kmsg.CreatePartitionsResponse)
		require.Equal(t, errNone, resp.Topics[0].ErrorCode, "v%d", v)
		require.Equal(t, errUnknownTopicOrPartition, resp.Topics[1].ErrorCode)
		got, _ := b.Partitions(context.Background(), "t")
		require.Equal(t, n, got, "validate only changes nothing")

		resp = c.do(createPartitionsReq(v, false,
			growTo("t", int32(n+2)),
			growTo("missing", 3),
			growTo("bad/name", 3),
			manual,
			growTo("dup", 2), growTo("dup", 3),
		)).(*kmsg.CreatePartitionsResponse)
		codes := map[string][]int16{}
		for _, rt := range resp.Topics {
			codes[rt.Topic] = append(codes[rt.Topic], rt.ErrorCode)
		}
		require.Equal(t, map[string][]int16{
			"t": {errNone}, "missing": {errUnknownTopicOrPartition}, "bad/name": {errInvalidTopicException},
			"m": {errInvalidReplicaAssignment}, "dup": {errInvalidRequest, errInvalidRequest},
		}, codes, "v%d", v)
		got, _ = b.Partitions(context.Background(), "t")
		require.Equal(t, n+2, got)

		// Not larger: INVALID_PARTITIONS, as for a count out of range.
		for _, count := range []int32{int32(n + 2), 1, 0, -1, maxTopicPartitions + 1} {
			for _, validate := range []bool{false, true} {
				resp = c.do(createPartitionsReq(v, validate, growTo("t", count))).(*kmsg.CreatePartitionsResponse)
				require.Equal(t, errInvalidPartitions, resp.Topics[0].ErrorCode, "count %d validate %v", count, validate)
				require.NotNil(t, resp.Topics[0].ErrorMessage)
			}
		}
	}
	// Producers see the new partitions.
	n, _ := b.Partitions(context.Background(), "t")
	require.Equal(t, 9, n)
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(9)
	pr.Acks, pr.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 8, records("in the last partition")
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	presp := c.do(pr).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, presp.Topics[0].Partitions[0].ErrorCode)
	p, err := b.Partition("t", 8)
	require.NoError(t, err)
	require.EqualValues(t, 1, p.EndOffset())
}

func alterReq(v int16, validateOnly bool, resources ...kmsg.IncrementalAlterConfigsRequestResource) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(v)
	req.ValidateOnly, req.Resources = validateOnly, resources
	return req
}

// alterOps is a topic resource; ops are (op, name, value) triples.
func alterOps(typ kmsg.ConfigResourceType, name string, ops ...any) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for i := 0; i+2 < len(ops)+1; i += 3 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name = ops[i].(kmsg.IncrementalAlterConfigOp), ops[i+1].(string)
		if v := ops[i+2].(string); v != "<nil>" {
			c.Value = kmsg.StringPtr(v)
		}
		r.Configs = append(r.Configs, c)
	}
	return r
}

type described struct {
	value     string
	source    kmsg.ConfigSource
	isDefault bool
	readOnly  bool
}

func describeTopic(t *testing.T, c *testClient, v int16, topic string) map[string]described {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(v)
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp := c.do(req).(*kmsg.DescribeConfigsResponse)
	require.Equal(t, errNone, resp.Resources[0].ErrorCode)
	out := map[string]described{}
	for _, rc := range resp.Resources[0].Configs {
		isDefault := rc.IsDefault // v0; later versions say it by the source
		if v >= 1 {
			isDefault = rc.Source == kmsg.ConfigSourceDefaultConfig
		}
		out[rc.Name] = described{*rc.Value, rc.Source, isDefault, rc.ReadOnly}
	}
	return out
}

func TestIncrementalAlterConfigs(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 2))
	c := dial(t, s.Addr())
	topic := kmsg.ConfigResourceTypeTopic
	set, del, app, sub := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract
	for v := int16(0); v <= 1; v++ {
		require.NoError(t, b.AlterTopicConfig("t", log.TopicConfig{}))
		before := describeTopic(t, c, 4, "t")
		require.Equal(t, described{"604800000", kmsg.ConfigSourceDefaultConfig, true, false}, before["retention.ms"])

		// Refused resources change nothing; each has its own error.
		resp := c.do(alterReq(v, false,
			alterOps(topic, "t", set, "retention.ms", "1000", set, "no.such.config", "1"),
			alterOps(topic, "missing", set, "retention.ms", "1000"),
			alterOps(topic, "t2", set, "retention.ms", "x"),
			alterOps(kmsg.ConfigResourceTypeBroker, "0", set, "log.retention.ms", "1"),
		)).(*kmsg.IncrementalAlterConfigsResponse)
		require.Len(t, resp.Resources, 4)
		require.Equal(t, []int16{errInvalidConfig, errUnknownTopicOrPartition, errUnknownTopicOrPartition, errInvalidRequest},
			[]int16{resp.Resources[0].ErrorCode, resp.Resources[1].ErrorCode, resp.Resources[2].ErrorCode, resp.Resources[3].ErrorCode}, "v%d", v)
		for _, bad := range []kmsg.IncrementalAlterConfigsRequestResource{
			alterOps(topic, "t", set, "retention.ms", "soon"),
			alterOps(topic, "t", set, "segment.bytes", "0"),
			alterOps(topic, "t", set, "cleanup.policy", "shred"),
			alterOps(topic, "t", set, "compression.type", "brotli"),
			alterOps(topic, "t", set, "retention.ms", "<nil>"),
			alterOps(topic, "t", del, "no.such.config", "<nil>"),
			alterOps(topic, "t", sub, "cleanup.policy", "delete"), // nothing left
		} {
			resp = c.do(alterReq(v, false, bad)).(*kmsg.IncrementalAlterConfigsResponse)
			require.Equal(t, errInvalidConfig, resp.Resources[0].ErrorCode, "%+v", bad.Configs)
		}
		for _, bad := range []kmsg.IncrementalAlterConfigsRequestResource{
			alterOps(topic, "t", app, "retention.ms", "1"),
			alterOps(topic, "t", sub, "segment.bytes", "1"),
			alterOps(topic, "t", set, "retention.ms", "1", del, "retention.ms", "<nil>"),
			alterOps(topic, "t", kmsg.IncrementalAlterConfigOp(7), "retention.ms", "1"),
		} {
			resp = c.do(alterReq(v, false, bad)).(*kmsg.IncrementalAlterConfigsResponse)
			require.Equal(t, errInvalidRequest, resp.Resources[0].ErrorCode, "%+v", bad.Configs)
		}
		resp = c.do(alterReq(v, false, alterOps(topic, "t", set, "retention.ms", "1"), alterOps(topic, "t", set, "segment.ms", "1"))).(*kmsg.IncrementalAlterConfigsResponse)
		require.Equal(t, errInvalidRequest, resp.Resources[0].ErrorCode, "a resource twice")
		require.Equal(t, errInvalidRequest, resp.Resources[1].ErrorCode)
		// Validate only: checked, not applied.
		resp = c.do(alterReq(v, true, alterOps(topic, "t", set, "retention.ms", "1000"))).(*kmsg.IncrementalAlterConfigsResponse)
		require.Equal(t, errNone, resp.Resources[0].ErrorCode)
		require.Equal(t, before, describeTopic(t, c, 4, "t"), "nothing changed")

		// Applied.
		resp = c.do(alterReq(v, false, alterOps(topic, "t",
			set, "retention.ms", "3600000",
			set, "max.message.bytes", "200",
			set, "compression.type", "zstd",
			set, "cleanup.policy", "compact",
		))).(*kmsg.IncrementalAlterConfigsResponse)
		require.Equal(t, errNone, resp.Resources[0].ErrorCode, "v%d", v)
		got := describeTopic(t, c, 4, "t")
		require.Equal(t, described{"3600000", kmsg.ConfigSourceDynamicTopicConfig, false, false}, got["retention.ms"])
		require.Equal(t, described{"200", kmsg.ConfigSourceDynamicTopicConfig, false, false}, got["max.message.bytes"])
		require.Equal(t, described{"zstd", kmsg.ConfigSourceDynamicTopicConfig, false, false}, got["compression.type"])
		require.Equal(t, described{"compact", kmsg.ConfigSourceDynamicTopicConfig, false, false}, got["cleanup.policy"])
		require.Equal(t, before["segment.bytes"], got["segment.bytes"], "the others untouched")
		cfg, err := b.TopicConfig("t")
		require.NoError(t, err)
		require.Equal(t, log.TopicCompressionZstd, cfg.Compression)
		// Live on the partitions.
		p, err := b.Partition("t", 1)
		require.NoError(t, err)
		noise := make([]byte, 300) // not compressible below the limit
		_, _ = rand.Read(noise)
		_, err = p.Append(log.Record{Value: noise})
		require.ErrorIs(t, err, log.ErrRecordTooLarge)

		// APPEND to and SUBTRACT from a list; DELETE back to the default.
		resp = c.do(alterReq(v, false, alterOps(topic, "t", app, "cleanup.policy", "delete", del, "retention.ms", "<nil>"))).(*kmsg.IncrementalAlterConfigsResponse)
		require.Equal(t, errNone, resp.Resources[0].ErrorCode)
		got = describeTopic(t, c, 4, "t")
		require.Equal(t, described{"compact,delete", kmsg.ConfigSourceDynamicTopicConfig, false, false}, got["cleanup.policy"])
		require.Equal(t, before["retention.ms"], got["retention.ms"])
		resp = c.do(alterReq(v, false, alterOps(topic, "t", sub, "cleanup.policy", "compact"))).(*kmsg.IncrementalAlterConfigsResponse)
		require.Equal(t, errNone, resp.Resources[0].ErrorCode)
		require.Equal(t, "delete", describeTopic(t, c, 4, "t")["cleanup.policy"].value)
	}
}

func TestDescribeConfigsSources(t *testing.T) {
	s, b, _ := start(t, Config{})
	c := dial(t, s.Addr())
	resp := c.do(createReq(5, false, newTopic("t", 1, -1, "retention.ms", "1000", "segment.bytes", "65536"))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errNone, resp.Topics[0].ErrorCode)
	src := map[string]int8{}
	for _, rc := range resp.Topics[0].Configs {
		src[rc.Name] = rc.Source
	}
	require.Equal(t, int8(kmsg.ConfigSourceDynamicTopicConfig), src["retention.ms"])
	require.Equal(t, int8(kmsg.ConfigSourceDefaultConfig), src["max.message.bytes"])
	for v := int16(0); v <= 4; v++ {
		got := describeTopic(t, c, v, "t")
		require.Equal(t, "1000", got["retention.ms"].value)
		require.False(t, got["retention.ms"].isDefault, "v%d", v)
		require.True(t, got["max.message.bytes"].isDefault, "v%d", v)
		require.False(t, got["max.message.bytes"].readOnly, "alterable")
		if v >= 1 {
			require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, got["segment.bytes"].source)
			require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["max.message.bytes"].source)
		}
	}
	// And after a restart of nothing but the lookup: the backend keeps them.
	o, err := b.TopicOverrides("t")
	require.NoError(t, err)
	require.EqualValues(t, 65536, o.SegmentBytes)
}

func deleteRecordsReq(v int16, topic string, offsets map[int32]int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(v)
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 8; p++ {
		off, ok := offsets[p]
		if !ok {
			continue
		}
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestDeleteRecords(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 3))
	c := dial(t, s.Addr())
	for i := 0; i < 3; i++ {
		p, err := b.Partition("t", i)
		require.NoError(t, err)
		for j := 0; j < 10; j++ {
			_, err = p.Append(log.Record{Value: []byte("v")})
			require.NoError(t, err)
		}
	}
	for v := int16(0); v <= 2; v++ {
		resp := c.do(deleteRecordsReq(v, "t", map[int32]int64{0: int64(2 + v), 1: 11, 2: -1, 5: 1})).(*kmsg.DeleteRecordsResponse)
		got := map[int32][2]int64{}
		for _, rp := range resp.Topics[0].Partitions {
			got[rp.Partition] = [2]int64{rp.LowWatermark, int64(rp.ErrorCode)}
		}
		require.Equal(t, map[int32][2]int64{
			0: {int64(2 + v), 0},
			1: {-1, int64(errOffsetOutOfRange)},
			2: {10, 0},
			5: {-1, int64(errUnknownTopicOrPartition)},
		}, got, "v%d", v)
		resp = c.do(deleteRecordsReq(v, "missing", map[int32]int64{0: 1})).(*kmsg.DeleteRecordsResponse)
		require.Equal(t, errUnknownTopicOrPartition, resp.Topics[0].Partitions[0].ErrorCode)
	}
	// Reads below the low watermark fail as Kafka's do; earliest is it.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(4)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -2
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	loResp := c.do(lo).(*kmsg.ListOffsetsResponse)
	require.EqualValues(t, 4, loResp.Topics[0].Partitions[0].Offset)
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(11)
	fr.MaxBytes, fr.ReplicaID = 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	fResp := c.do(fr).(*kmsg.FetchResponse)
	require.Equal(t, errOffsetOutOfRange, fResp.Topics[0].Partitions[0].ErrorCode)
	require.EqualValues(t, 4, fResp.Topics[0].Partitions[0].LogStartOffset)
}

func TestStandaloneOffsetForLeaderEpoch(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	p, err := b.Partition("t", 0)
	require.NoError(t, err)
	for j := 0; j < 5; j++ {
		_, err = p.Append(log.Record{Value: []byte("v")})
		require.NoError(t, err)
	}
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(v)
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		for i, c := range []struct{ part, current, epoch int32 }{{0, -1, 0}, {0, 0, 0}, {0, -1, 3}, {7, -1, 0}, {0, 1, 0}} {
			if v < 2 && c.current >= 0 || i == 4 && v < 2 {
				continue // no current leader epoch before v2
			}
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = c.part, c.current, c.epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.OffsetForLeaderEpochResponse)
		type answer struct {
			code  int16
			epoch int32
			end   int64
		}
		var got []answer
		for _, rp := range resp.Topics[0].Partitions {
			a := answer{rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset}
			if v < 1 {
				a.epoch = -1 // v0 has no epoch in the answer
			}
			got = append(got, a)
		}
		e0 := int32(0)
		if v < 1 {
			e0 = -1
		}
		want := []answer{{0, e0, 5}}
		if v >= 2 {
			want = append(want, answer{0, e0, 5})
		}
		want = append(want, answer{0, -1, -1}, answer{errUnknownTopicOrPartition, -1, -1})
		if v >= 2 {
			want = append(want, answer{errUnknownLeaderEpoch, -1, -1})
		}
		require.Equal(t, want, got, "v%d", v)
	}
}

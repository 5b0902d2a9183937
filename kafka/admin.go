package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleCreateTopics creates topics one by one; each gets its own error.
func handleCreateTopics(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.CreateTopicsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		t.NumPartitions, t.ReplicationFactor = -1, -1
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("%w: topic %s is listed more than once", errInvalidRequestErr, rt.Topic)
		} else {
			err = s.createTopic(ctx, rt, req.ValidateOnly)
		}
		if err != nil {
			t.ErrorCode, t.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		} else if cfg, err := s.b.TopicConfig(rt.Topic); err == nil {
			t.TopicID = topicID(rt.Topic)
			t.NumPartitions, t.ReplicationFactor = int32(cfg.Partitions), int16(cfg.ReplicationFactor)
			t.Configs = createdConfigs(cfg)
		} else if req.ValidateOnly {
			t.NumPartitions, t.ReplicationFactor = rt.NumPartitions, rt.ReplicationFactor
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}

// errInvalidRequestErr stands for INVALID_REQUEST.
var errInvalidRequestErr = errors.New("kafka: invalid request")

// createTopic creates (or, validateOnly, checks) one topic.
func (s *Server) createTopic(ctx context.Context, rt kmsg.CreateTopicsRequestTopic, validateOnly bool) error {
	if err := log.ValidTopicName(rt.Topic); err != nil {
		return err
	}
	if len(rt.ReplicaAssignment) > 0 {
		return fmt.Errorf("%w: manual replica assignment", errInvalidReplicaAssignmentErr)
	}
	var cfg log.TopicConfig
	switch {
	case rt.NumPartitions == -1: // the broker's default
	case rt.NumPartitions <= 0 || rt.NumPartitions > maxTopicPartitions:
		return fmt.Errorf("%w: %d partitions (1 to %d)", errInvalidPartitionsErr, rt.NumPartitions, maxTopicPartitions)
	default:
		cfg.Partitions = int(rt.NumPartitions)
	}
	switch {
	case rt.ReplicationFactor == -1:
	case rt.ReplicationFactor <= 0:
		return fmt.Errorf("%w: replication factor %d", errInvalidReplicationFactorErr, rt.ReplicationFactor)
	default:
		cfg.ReplicationFactor = int(rt.ReplicationFactor)
	}
	for _, kv := range rt.Configs {
		if err := setTopicConfig(&cfg, kv.Name, kv.Value); err != nil {
			return err
		}
	}
	if validateOnly {
		if err := cfg.WithDefaults().Validate(); err != nil {
			return err
		}
		if _, err := s.b.Partitions(rt.Topic); err == nil {
			return fmt.Errorf("%w: %s", log.ErrTopicExists, rt.Topic)
		}
		return nil
	}
	return s.b.CreateTopicContext(ctx, rt.Topic, cfg)
}

// maxTopicPartitions bounds what one CreateTopics may ask for: a single
// request must not make the broker create millions of partitions.
const maxTopicPartitions = 10000

// More errors with a Kafka code of their own.
var (
	errInvalidPartitionsErr        = errors.New("kafka: invalid number of partitions")
	errInvalidReplicationFactorErr = errors.New("kafka: invalid replication factor")
	errInvalidReplicaAssignmentErr = errors.New("kafka: invalid replica assignment")
)

func handleDeleteTopics(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DeleteTopicsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{t.Topic, t.TopicID})
		}
	} else {
		for _, name := range req.TopicNames {
			targets = append(targets, target{name: kmsg.StringPtr(name)})
		}
	}
	for _, tg := range targets {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = tg.name, tg.id
		var err error
		switch {
		case tg.name != nil:
			t.TopicID = topicID(*tg.name)
			err = s.b.DeleteTopic(*tg.name)
		default:
			name, ok := s.topicName(tg.id)
			if !ok {
				err = errUnknownTopicIDErr
				break
			}
			t.Topic = kmsg.StringPtr(name)
			err = s.b.DeleteTopic(name)
		}
		if err != nil {
			t.ErrorCode, t.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
			if t.ErrorCode == errUnknownTopicOrPartition && tg.name == nil {
				t.ErrorCode = errUnknownTopicID
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}

// Topic config names, Kafka's.
const (
	cfgCleanupPolicy          = "cleanup.policy"
	cfgRetentionMs            = "retention.ms"
	cfgRetentionBytes         = "retention.bytes"
	cfgSegmentBytes           = "segment.bytes"
	cfgSegmentMs              = "segment.ms"
	cfgIndexIntervalBytes     = "index.interval.bytes"
	cfgSegmentIndexBytes      = "segment.index.bytes"
	cfgMaxMessageBytes        = "max.message.bytes"
	cfgMinInsyncReplicas      = "min.insync.replicas"
	cfgFlushMessages          = "flush.messages"
	cfgFlushMs                = "flush.ms"
	cfgMessageTimestampType   = "message.timestamp.type"
	cfgCompressionType        = "compression.type"
	cfgMessageFormatVersion   = "message.format.version"
	cfgUncleanLeaderElection  = "unclean.leader.election.enable"
	cfgMessageDownconversion  = "message.downconversion.enable"
	cfgPreallocate            = "preallocate"
	cfgFileDeleteDelayMs      = "file.delete.delay.ms"
	cfgDeleteRetentionMs      = "delete.retention.ms"
	cfgMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
)

// topicConfigs lists a topic's configuration as Kafka names it, in
// Kafka's units.
func topicConfigs(cfg log.TopicConfig) [][2]string {
	retention := cfg.RetentionTime.Milliseconds()
	if cfg.RetentionTime < 0 {
		retention = -1
	}
	retBytes := cfg.RetentionBytes
	if retBytes == 0 {
		retBytes = -1
	}
	flushMsgs := cfg.FlushMessages
	if flushMsgs == 0 {
		flushMsgs = 1<<63 - 1 // Kafka's "never"
	}
	flushMs := cfg.FlushInterval.Milliseconds()
	if cfg.FlushInterval == 0 {
		flushMs = 1<<63 - 1
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return [][2]string{
		{cfgCleanupPolicy, cfg.Cleanup.String()},
		{cfgCompressionType, "producer"},
		{cfgFlushMessages, i(flushMsgs)},
		{cfgFlushMs, i(flushMs)},
		{cfgIndexIntervalBytes, i(int64(cfg.IndexIntervalBytes))},
		{cfgMaxMessageBytes, i(int64(cfg.MaxMessageBytes))},
		{cfgMessageTimestampType, "CreateTime"},
		{cfgMinInsyncReplicas, i(int64(cfg.MinInSyncReplicas))},
		{cfgRetentionBytes, i(retBytes)},
		{cfgRetentionMs, i(retention)},
		{cfgSegmentBytes, i(cfg.SegmentBytes)},
		{cfgSegmentIndexBytes, i(int64(cfg.MaxIndexBytes))},
		{cfgSegmentMs, i(cfg.SegmentTime.Milliseconds())},
	}
}

func createdConfigs(cfg log.TopicConfig) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, kv := range topicConfigs(cfg) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		c.Source = int8(kmsg.ConfigSourceDefaultConfig)
		out = append(out, c)
	}
	return out
}

// setTopicConfig sets one Kafka topic config on cfg. Configs Strata
// accepts but does not act on are accepted when set to what Strata does.
func setTopicConfig(cfg *log.TopicConfig, name string, value *string) error {
	if value == nil {
		return nil // the default
	}
	v := *value
	bad := func() error {
		return fmt.Errorf("%w: %s=%q", log.ErrInvalidConfig, name, v)
	}
	num := func() (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, bad()
		}
		return n, nil
	}
	var n int64
	var err error
	switch name {
	case cfgCleanupPolicy:
		switch v {
		case "delete":
			cfg.Cleanup = log.CleanupDelete
		case "compact":
			cfg.Cleanup = log.CleanupCompact
		case "compact,delete", "delete,compact":
			cfg.Cleanup = log.CleanupCompactDelete
		default:
			return bad()
		}
		return nil
	case cfgCompressionType:
		if v != "producer" {
			return bad()
		}
		return nil
	case cfgMessageTimestampType:
		if v != "CreateTime" {
			return bad()
		}
		return nil
	case cfgMessageFormatVersion, cfgUncleanLeaderElection, cfgMessageDownconversion,
		cfgPreallocate, cfgFileDeleteDelayMs, cfgDeleteRetentionMs, cfgMinCleanableDirtyRatio:
		return nil // accepted, not acted on
	}
	if n, err = num(); err != nil {
		return err
	}
	switch name {
	case cfgRetentionMs:
		if n < 0 {
			cfg.RetentionTime = -1
		} else {
			cfg.RetentionTime = time.Duration(n) * time.Millisecond
		}
	case cfgRetentionBytes:
		if n < 0 {
			n = 0 // unlimited
		}
		cfg.RetentionBytes = n
	case cfgSegmentBytes:
		cfg.SegmentBytes = n
	case cfgSegmentMs:
		cfg.SegmentTime = time.Duration(n) * time.Millisecond
	case cfgIndexIntervalBytes:
		cfg.IndexIntervalBytes = int(n)
	case cfgSegmentIndexBytes:
		cfg.MaxIndexBytes = int(n)
	case cfgMaxMessageBytes:
		cfg.MaxMessageBytes = int(n)
	case cfgMinInsyncReplicas:
		cfg.MinInSyncReplicas = int(n)
	case cfgFlushMessages:
		if n == 1<<63-1 {
			n = 0
		}
		cfg.FlushMessages = n
	case cfgFlushMs:
		if n == 1<<63-1 {
			n = 0
		}
		cfg.FlushInterval = time.Duration(n) * time.Millisecond
	default:
		return fmt.Errorf("%w: unknown topic config %s", log.ErrInvalidConfig, name)
	}
	if n <= 0 && name != cfgRetentionMs && name != cfgRetentionBytes && name != cfgFlushMessages && name != cfgFlushMs {
		return bad()
	}
	return nil
}

// handleDescribeConfigs describes topics' configurations (read-only);
// broker resources get an empty list.
func handleDescribeConfigs(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeConfigsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			cfg, err := s.b.TopicConfig(rr.ResourceName)
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
				break
			}
			want := map[string]bool{}
			for _, n := range rr.ConfigNames {
				want[n] = true
			}
			for _, kv := range topicConfigs(cfg) {
				if rr.ConfigNames != nil && !want[kv[0]] {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value = kv[0], kmsg.StringPtr(kv[1])
				rc.ReadOnly = true
				rc.Source = kmsg.ConfigSourceDefaultConfig
				res.Configs = append(res.Configs, rc)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		default:
			res.ErrorCode = errInvalidRequest
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply{resp: resp}
}

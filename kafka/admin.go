package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/internal/kerr"
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
			overrides, _ := s.topicOverrides(rt.Topic)
			t.Configs = createdConfigs(cfg, overrides)
		} else if req.ValidateOnly {
			t.NumPartitions, t.ReplicationFactor = rt.NumPartitions, rt.ReplicationFactor
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}

// errInvalidRequestErr stands for INVALID_REQUEST.
var errInvalidRequestErr = kerr.ErrInvalidRequest

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
		// Kafka's rule: no more replicas than live brokers, those of the
		// whole cluster, with this listener or not (a cluster member that
		// knows of none yet leaves it to its controller). A cluster
		// member checks it itself when it creates: in a cluster that is
		// forming it waits, within the request's timeout, for the
		// brokers to register (replica.Broker.CreateTopic).
		brokers, _ := s.clusterBrokers()
		live := len(brokers)
		if s.caps.listener != nil {
			live = s.caps.listener.LiveBrokers()
		}
		member := s.caps.cluster != nil
		if live > 0 && int(rt.ReplicationFactor) > live && (!member || validateOnly) {
			return fmt.Errorf("%w: replication factor %d with %d brokers", errInvalidReplicationFactorErr, rt.ReplicationFactor, live)
		}
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
		if _, err := s.b.Partitions(ctx, rt.Topic); err == nil {
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
	errInvalidPartitionsErr        = kerr.ErrInvalidPartitions
	errInvalidReplicationFactorErr = kerr.ErrInvalidReplicationFactor
	errInvalidReplicaAssignmentErr = kerr.ErrInvalidReplicaAssignment
)

func handleDeleteTopics(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DeleteTopicsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
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
			err = s.b.DeleteTopicContext(ctx, *tg.name)
		default:
			name, ok := s.topicName(tg.id)
			if !ok {
				err = errUnknownTopicIDErr
				break
			}
			t.Topic = kmsg.StringPtr(name)
			err = s.b.DeleteTopicContext(ctx, name)
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

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// admin sends the topic administration requests that kafka.Client has no
// method for (listing, creating, deleting and describing topics, groups):
// kmsg encodes and decodes every request, kafka.Client.Request carries it
// (with the target's TLS and SASL) to a broker of the cluster, which is
// enough for a standalone broker and, for a cluster, for what any broker
// answers (Metadata, DescribeConfigs) or forwards to the controller
// (CreateTopics, DeleteTopics: Kafka 2.8+). Requests go at most at the
// version given, which every Kafka since 2.1 serves; the broker may pick
// an older one, and the callers read only fields those versions have.
type admin struct {
	c *kafka.Client
}

const adminTimeout = 30 * time.Second

func dialAdmin(t *target) (*admin, error) {
	c, err := dialKafka(t)
	if err != nil {
		return nil, err
	}
	return &admin{c: c}, nil
}

func (a *admin) Close() error { return a.c.Close() }

// do sends req at version v at most and returns its response.
func (a *admin) do(req kmsg.Request, v int16) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	resp, err := a.c.Request(ctx, req, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// kafkaCodeError turns a Kafka error code and message into an error,
// matching log's sentinels where the topics command tests them.
func kafkaCodeError(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	name := kerr.Name(code)
	switch code {
	case kerr.NonEmptyGroup:
		name += ": the group has active members"
	case kerr.GroupIDNotFound:
		name += ": no such group"
	}
	text := name
	if msg != nil && *msg != "" {
		text += ": " + *msg
	}
	switch code {
	case 3:
		return fmt.Errorf("%s (%w)", text, log.ErrUnknownTopic)
	case 36:
		return fmt.Errorf("%s (%w)", text, log.ErrTopicExists)
	}
	return errors.New(text)
}

// adminTopic is what Metadata says of a topic.
type adminTopic struct {
	name       string
	partitions []kmsg.MetadataResponseTopicPartition
}

// metadata returns the named topics (nil: every topic), sorted, leaving
// out internal ones (__consumer_offsets) unless named.
func (a *admin) metadata(names []string) ([]adminTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // describe never creates a topic, whatever the broker's auto-creation
	if names != nil {
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // all topics
	}
	r, err := a.do(req, 7)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.MetadataResponse)
	var out []adminTopic
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kafkaCodeError(t.ErrorCode, nil); err != nil {
			return nil, fmt.Errorf("topic %s: %w", name, err)
		}
		if t.IsInternal && names == nil {
			continue
		}
		ps := slices.Clone(t.Partitions)
		slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
		out = append(out, adminTopic{name: name, partitions: ps})
	}
	slices.SortFunc(out, func(a, b adminTopic) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// createTopic creates a topic with cfg's partitions, replication factor and
// the settings that differ from the defaults, in Kafka's names.
func (a *admin) createTopic(name string, cfg log.TopicConfig) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(adminTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions, rt.ReplicationFactor = -1, -1 // the broker's defaults
	if cfg.Partitions > 0 {
		rt.NumPartitions = int32(cfg.Partitions)
	}
	if cfg.ReplicationFactor > 0 {
		rt.ReplicationFactor = int16(cfg.ReplicationFactor)
	}
	for _, kv := range strings.Split(formatTopicConfig(cfg.WithDefaults()), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	r, err := a.do(req, 4)
	if err != nil {
		return err
	}
	for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
		if err := kafkaCodeError(t.ErrorCode, t.ErrorMessage); err != nil {
			return fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	return nil
}

func (a *admin) deleteTopic(name string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = int32(adminTimeout / time.Millisecond)
	req.TopicNames = []string{name}
	r, err := a.do(req, 3)
	if err != nil {
		return err
	}
	for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
		if err := kafkaCodeError(t.ErrorCode, t.ErrorMessage); err != nil {
			return fmt.Errorf("delete topic %s: %w", name, err)
		}
	}
	return nil
}

// topicConfig returns a topic's configuration as far as Strata's topic
// settings go (others are left out).
func (a *admin) topicConfig(name string) (log.TopicConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
	req.Resources = append(req.Resources, rr)
	r, err := a.do(req, 2)
	var cfg log.TopicConfig
	if err != nil {
		return cfg, err
	}
	for _, res := range r.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kafkaCodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			return cfg, fmt.Errorf("describe configs of %s: %w", name, err)
		}
		for _, c := range res.Configs {
			if c.Value == nil {
				continue
			}
			v := *c.Value
			if (c.Name == "flush.messages" || c.Name == "flush.ms") && v == "9223372036854775807" {
				continue // Kafka's "never": the default
			}
			setTopicConfig(&cfg, c.Name+"="+v) // a setting Strata does not have is left out
		}
	}
	return cfg.WithDefaults(), nil
}

// runTopicsKafka runs a topics action against a Kafka-protocol broker.
func runTopicsKafka(e *env, t *target, action, topic string, cfg log.TopicConfig, ifExists, ifNotExists bool, filter partitionFilter) (err error) {
	a, err := dialAdmin(t)
	if err != nil {
		return err
	}
	defer a.Close()
	switch action {
	case "list":
		ts, err := a.metadata(nil)
		if err != nil {
			return err
		}
		for _, t := range ts {
			fmt.Fprintln(e.stdout, t.name)
		}
	case "create":
		err := a.createTopic(topic, cfg)
		if errors.Is(err, log.ErrTopicExists) && ifNotExists {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Created topic %s.\n", topic)
	case "delete":
		err := a.deleteTopic(topic)
		if errors.Is(err, log.ErrUnknownTopic) && ifExists {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Deleted topic %s.\n", topic)
	case "describe":
		var names []string
		if topic != "" {
			names = []string{topic}
		}
		ts, err := a.metadata(names)
		if errors.Is(err, log.ErrUnknownTopic) && ifExists {
			return nil
		}
		if err != nil {
			return err
		}
		live := func(int32) bool { return true }
		if filter.unavailable { // topics_filter.go
			if live, err = a.liveBrokers(); err != nil {
				return err
			}
		}
		w := bufio.NewWriter(e.stdout)
		for _, t := range ts {
			cfg, err := a.topicConfig(t.name)
			if err != nil {
				return err
			}
			rf := 0
			if len(t.partitions) > 0 {
				rf = len(t.partitions[0].Replicas)
			}
			if !filter.any() {
				fmt.Fprintf(w, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
					t.name, len(t.partitions), rf, formatTopicConfig(cfg))
			}
			for _, p := range t.partitions {
				if !filter.keep(p.Leader, p.Replicas, p.ISR, cfg.MinInSyncReplicas, live) {
					continue
				}
				fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\n",
					t.name, p.Partition, p.Leader, joinInt32(p.Replicas), joinInt32(p.ISR))
			}
		}
		return w.Flush()
	}
	return nil
}

func joinInt32(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

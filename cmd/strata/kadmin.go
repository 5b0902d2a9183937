package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// admin is a connection for the topic administration that kafka.Client
// does not offer (listing, creating, deleting and describing topics): kmsg
// encodes and decodes every request; admin only frames them, one at a
// time, at versions every Kafka since 2.1 serves and that need no
// flexible headers. It goes to the first bootstrap server, which is
// enough for a standalone broker and, for a cluster, for what any broker
// answers (Metadata, DescribeConfigs) or forwards to the controller
// (CreateTopics, DeleteTopics: Kafka 2.8+). No TLS or SASL: use a client
// that has them for a broker that needs them.
type admin struct {
	conn net.Conn
	r    *bufio.Reader
	corr int32
}

const adminTimeout = 30 * time.Second

func dialAdmin(bootstrap string) (*admin, error) {
	addr, _, _ := strings.Cut(bootstrap, ",")
	conn, err := net.DialTimeout("tcp", addr, adminTimeout)
	if err != nil {
		return nil, fmt.Errorf("connect to --bootstrap-server %s: %w", bootstrap, err)
	}
	return &admin{conn: conn, r: bufio.NewReader(conn)}, nil
}

func (a *admin) Close() error { return a.conn.Close() }

// do sends req at version v and reads its response into resp.
func (a *admin) do(req kmsg.Request, v int16) (kmsg.Response, error) {
	req.SetVersion(v)
	a.corr++
	buf := make([]byte, 4, 256)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(v))
	buf = binary.BigEndian.AppendUint32(buf, uint32(a.corr))
	const clientID = "strata-admin"
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(clientID)))
	buf = append(buf, clientID...)
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	a.conn.SetDeadline(time.Now().Add(adminTimeout))
	if _, err := a.conn.Write(buf); err != nil {
		return nil, fmt.Errorf("%s request: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(a.r, size[:]); err != nil {
		return nil, fmt.Errorf("%s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("%s response of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(a.r, body); err != nil {
		return nil, fmt.Errorf("%s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != a.corr {
		return nil, fmt.Errorf("%s response with correlation id %d, want %d", kmsg.NameForKey(req.Key()), got, a.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// kafkaCodeError turns a Kafka error code and message into an error,
// matching log's sentinels where the topics command tests them.
func kafkaCodeError(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	names := map[int16]string{
		3: "UNKNOWN_TOPIC_OR_PARTITION", 17: "INVALID_TOPIC_EXCEPTION", 29: "TOPIC_AUTHORIZATION_FAILED",
		36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR",
		40: "INVALID_CONFIG", 41: "NOT_CONTROLLER", 42: "INVALID_REQUEST", 73: "TOPIC_DELETION_DISABLED",
	}
	name, ok := names[code]
	if !ok {
		name = fmt.Sprintf("Kafka error code %d", code)
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
func runTopicsKafka(e *env, bootstrap, action, topic string, cfg log.TopicConfig, ifExists, ifNotExists bool) (err error) {
	a, err := dialAdmin(bootstrap)
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
			fmt.Fprintf(w, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				t.name, len(t.partitions), rf, formatTopicConfig(cfg))
			for _, p := range t.partitions {
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

// listGroups returns the ids of the broker's consumer groups, sorted.
func (a *admin) listGroups() ([]string, error) {
	r, err := a.do(kmsg.NewPtrListGroupsRequest(), 2)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.ListGroupsResponse)
	if err := kafkaCodeError(resp.ErrorCode, nil); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	ids := make([]string, 0, len(resp.Groups))
	for _, g := range resp.Groups {
		ids = append(ids, g.Group)
	}
	slices.Sort(ids)
	return ids, nil
}

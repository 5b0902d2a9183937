package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Client's topic administration: the verbs of log.Admin, in the shapes
// log.Broker and replica.Broker have them, over the Kafka protocol, so
// admin code runs unchanged against an embedded broker, a cluster member
// or any Kafka-protocol cluster. Creations, deletions and new partitions
// go to the controller the cluster names (a broker of a KRaft cluster
// forwards them); configs to any broker; DeleteRecords to each partition's
// leader. A response's error code is an *Error that matches log's
// sentinel with errors.Is (TOPIC_ALREADY_EXISTS is log.ErrTopicExists).

var _ log.Admin = (*Client)(nil)

// Highest versions of the admin requests the Client sends.
const (
	clientCreateTopicsMax     = 7
	clientDeleteTopicsMax     = 6
	clientCreatePartitionsMax = 3
	clientDescribeConfigsMax  = 4
	clientAlterConfigsMax     = 1
	clientDeleteRecordsMax    = 2
)

// errNotController is NOT_CONTROLLER: the controller moved; ask again.
const errNotController int16 = 41

// adminTimeout is the time an admin request asks the cluster to wait for
// (TimeoutMillis): what is left of ctx, else the request timeout.
func (c *Client) adminTimeout(ctx context.Context) int32 {
	d := c.requestTimeout()
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	return int32(max(d.Milliseconds(), 1))
}

// controllerConn returns a connection to the broker the cluster names as
// its controller (Metadata's ControllerID), or to any broker if it names
// none this Client can reach.
func (c *Client) controllerConn(ctx context.Context) (*brokerConn, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: only brokers and controller
	resp, err := bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout()))
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata: %w", err)
	}
	m := resp.(*kmsg.MetadataResponse)
	for _, b := range m.Brokers {
		if b.NodeID == m.ControllerID {
			if cc, err := c.conn(ctx, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))); err == nil {
				return cc, nil
			}
		}
	}
	return bc, nil
}

// controllerDo sends req to the controller and reads one error code of
// its response with code, asking again (a few times) while the answer is
// NOT_CONTROLLER.
func (c *Client) controllerDo(ctx context.Context, req kmsg.Request, max int16, code func(kmsg.Response) (int16, *string)) error {
	for attempt := 0; ; attempt++ {
		bc, err := c.controllerConn(ctx)
		if err != nil {
			return err
		}
		resp, err := bc.do(ctx, req, max)
		if err != nil {
			return err
		}
		ec, msg := code(resp)
		if ec == errNotController && attempt < 3 {
			if err := sleepCtx(ctx, backoffDelay(attempt)); err != nil {
				return err
			}
			continue
		}
		return responseErr(ec, msg)
	}
}

// responseErr is the error of an admin response's code and message.
func responseErr(code int16, msg *string) error {
	err := codeError(code)
	if err == nil || msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CreateTopic creates a topic with cfg's partitions (0: the cluster's
// default), replication factor (0: the cluster's default) and the topic
// configs of cfg's non-zero fields, as replica.Broker.CreateTopic does
// (log.ErrTopicExists, log.ErrInvalidTopic, log.ErrInvalidConfig,
// log.ErrInvalidPartitions).
func (c *Client) CreateTopic(ctx context.Context, name string, cfg log.TopicConfig) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = c.adminTimeout(ctx)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions, t.ReplicationFactor = -1, -1
	if cfg.Partitions != 0 {
		t.NumPartitions = int32(cfg.Partitions)
	}
	if cfg.ReplicationFactor != 0 {
		t.ReplicationFactor = int16(cfg.ReplicationFactor)
	}
	for _, kv := range topicConfigsOf(cfg) {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = kv.name, kmsg.StringPtr(kv.value)
		t.Configs = append(t.Configs, rc)
	}
	req.Topics = append(req.Topics, t)
	err := c.controllerDo(ctx, req, clientCreateTopicsMax, func(r kmsg.Response) (int16, *string) {
		resp := r.(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 1 {
			return errUnknownServerError, kmsg.StringPtr("no topic in the answer")
		}
		return resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage
	})
	if err != nil {
		return fmt.Errorf("kafka: create topic %s: %w", name, err)
	}
	c.refreshQuiet(ctx)
	return nil
}

// CreateTopicContext is CreateTopic, by the name kafka.Backend and
// log.Admin give it.
func (c *Client) CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error {
	return c.CreateTopic(ctx, name, cfg)
}

// DeleteTopic deletes a topic and its data (log.ErrUnknownTopic), as
// replica.Broker.DeleteTopic does.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = c.adminTimeout(ctx)
	req.TopicNames = []string{name} // v0-5
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr(name) // v6+
	req.Topics = append(req.Topics, t)
	err := c.controllerDo(ctx, req, clientDeleteTopicsMax, func(r kmsg.Response) (int16, *string) {
		resp := r.(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 {
			return errUnknownServerError, kmsg.StringPtr("no topic in the answer")
		}
		return resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage
	})
	if err != nil {
		return fmt.Errorf("kafka: delete topic %s: %w", name, err)
	}
	c.mu.Lock()
	delete(c.leaders, name)
	c.mu.Unlock()
	return nil
}

// DeleteTopicContext is DeleteTopic, by the name kafka.Backend and
// log.Admin give it.
func (c *Client) DeleteTopicContext(ctx context.Context, name string) error {
	return c.DeleteTopic(ctx, name)
}

// CreatePartitions grows topic to count partitions in all
// (log.ErrInvalidPartitions for a count not above the current one,
// log.ErrUnknownTopic).
func (c *Client) CreatePartitions(ctx context.Context, topic string, count int) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = c.adminTimeout(ctx)
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, int32(count)
	req.Topics = append(req.Topics, t)
	err := c.controllerDo(ctx, req, clientCreatePartitionsMax, func(r kmsg.Response) (int16, *string) {
		resp := r.(*kmsg.CreatePartitionsResponse)
		if len(resp.Topics) != 1 {
			return errUnknownServerError, kmsg.StringPtr("no topic in the answer")
		}
		return resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage
	})
	if err != nil {
		return fmt.Errorf("kafka: create partitions of %s: %w", topic, err)
	}
	c.refreshQuiet(ctx)
	return nil
}

// ListTopics returns the names of the cluster's topics, sorted as the
// cluster lists them (log.Broker's and replica.Broker's Topics, over the
// network: it can fail).
func (c *Client) ListTopics(ctx context.Context) ([]string, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest() // Topics nil: all of them
	resp, err := bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout()))
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata: %w", err)
	}
	var out []string
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && t.ErrorCode == errNone && !t.IsInternal {
			out = append(out, *t.Topic)
		}
	}
	return out, nil
}

// describeTopicConfigs returns a topic's configs as DescribeConfigs
// answers them.
func (c *Client) describeTopicConfigs(ctx context.Context, topic string) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp, err := bc.do(ctx, req, clientDescribeConfigsMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: describe configs of %s: %w", topic, err)
	}
	rs := resp.(*kmsg.DescribeConfigsResponse).Resources
	if len(rs) != 1 {
		return nil, fmt.Errorf("kafka: describe configs of %s: %w", topic, codeError(errUnknownServerError))
	}
	if err := responseErr(rs[0].ErrorCode, rs[0].ErrorMessage); err != nil {
		return nil, fmt.Errorf("kafka: describe configs of %s: %w", topic, err)
	}
	return rs[0].Configs, nil
}

// topicConfigFrom sets on a TopicConfig the described configs that keep
// reports (all, or those set on the topic). Configs Strata does not know
// (Apache Kafka has more) are left out; a value Strata's TopicConfig
// cannot hold is log.ErrInvalidConfig.
func topicConfigFrom(topic string, cs []kmsg.DescribeConfigsResponseResourceConfig, keep func(kmsg.DescribeConfigsResponseResourceConfig) bool) (log.TopicConfig, error) {
	var cfg log.TopicConfig
	for _, rc := range cs {
		if rc.Value == nil || !keep(rc) {
			continue
		}
		if _, ok := topicConfigDefOf(rc.Name); !ok {
			continue
		}
		if err := SetTopicConfig(&cfg, rc.Name, *rc.Value); err != nil {
			return log.TopicConfig{}, fmt.Errorf("kafka: config of %s: %w", topic, err)
		}
	}
	return cfg, nil
}

// TopicConfig returns a topic's configuration, defaults applied, as the
// cluster describes it (log.ErrUnknownTopic), within the Client's request
// timeout (log.Broker's shape has no context).
func (c *Client) TopicConfig(topic string) (log.TopicConfig, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.requestTimeout())
	defer cancel()
	cs, err := c.describeTopicConfigs(ctx, topic)
	if err != nil {
		return log.TopicConfig{}, err
	}
	cfg, err := topicConfigFrom(topic, cs, func(kmsg.DescribeConfigsResponseResourceConfig) bool { return true })
	if err != nil {
		return log.TopicConfig{}, err
	}
	n, err := c.topicLayout(ctx, topic, &cfg)
	if err != nil {
		return log.TopicConfig{}, err
	}
	cfg.Partitions = n
	return cfg.WithDefaults(), nil
}

// topicLayout asks the cluster for topic's partitions and sets cfg's
// replication factor from partition 0's replicas.
func (c *Client) topicLayout(ctx context.Context, topic string, cfg *log.TopicConfig) (int, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout()))
	if err != nil {
		return 0, fmt.Errorf("kafka: metadata: %w", err)
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := codeError(t.ErrorCode); err != nil {
			return 0, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if p.Partition == 0 && len(p.Replicas) > 0 {
				cfg.ReplicationFactor = len(p.Replicas)
			}
		}
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("kafka: metadata of %s: %w", topic, log.ErrUnknownTopic)
}

// TopicOverrides returns the configuration set on the topic itself (the
// configs the cluster describes as DYNAMIC_TOPIC_CONFIG), within the
// Client's request timeout.
func (c *Client) TopicOverrides(topic string) (log.TopicConfig, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.requestTimeout())
	defer cancel()
	cs, err := c.describeTopicConfigs(ctx, topic)
	if err != nil {
		return log.TopicConfig{}, err
	}
	return topicConfigFrom(topic, cs, func(rc kmsg.DescribeConfigsResponseResourceConfig) bool {
		return rc.Source == kmsg.ConfigSourceDynamicTopicConfig
	})
}

// AlterTopicConfig replaces the configuration set on the topic, as
// log.Broker.AlterTopicConfig does: overrides' non-zero fields are set,
// its zero fields go back to the default (IncrementalAlterConfigs SET and
// DELETE), within the Client's request timeout (log.ErrInvalidConfig,
// log.ErrUnknownTopic).
func (c *Client) AlterTopicConfig(topic string, overrides log.TopicConfig) error {
	return c.alterTopicConfig(topic, overrides, false)
}

// ValidateTopicConfig reports what AlterTopicConfig would, changing
// nothing (validate_only).
func (c *Client) ValidateTopicConfig(topic string, overrides log.TopicConfig) error {
	return c.alterTopicConfig(topic, overrides, true)
}

func (c *Client) alterTopicConfig(topic string, overrides log.TopicConfig, validateOnly bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.requestTimeout())
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for i := range topicConfigTable {
		d := &topicConfigTable[i]
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op = d.name, opDelete
		if d.isSetOn(overrides) {
			rc.Op, rc.Value = opSet, kmsg.StringPtr(d.get(overrides))
		}
		rr.Configs = append(rr.Configs, rc)
	}
	req.Resources = append(req.Resources, rr)
	bc, err := c.anyConn(ctx)
	if err != nil {
		return err
	}
	resp, err := bc.do(ctx, req, clientAlterConfigsMax)
	if err == nil {
		rs := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
		if len(rs) != 1 {
			err = codeError(errUnknownServerError)
		} else {
			err = responseErr(rs[0].ErrorCode, rs[0].ErrorMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("kafka: alter config of %s: %w", topic, err)
	}
	return nil
}

// DeleteRecords makes the records of tp below offset (-1: the high
// watermark) unreadable and returns the new log start offset, asking the
// partition's leader (log.ErrOffsetOutOfRange past the high watermark).
func (c *Client) DeleteRecords(ctx context.Context, tp log.TopicPartition, offset int64) (int64, error) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = c.adminTimeout(ctx)
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = int32(tp.Partition), offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for attempt := 0; ; attempt++ {
		low, err := c.deleteRecordsOnce(ctx, tp, req)
		if err == nil {
			return low, nil
		}
		if attempt >= 3 || !errors.Is(err, log.ErrNotLeader) {
			return -1, fmt.Errorf("kafka: delete records of %s: %w", tp, err)
		}
		c.refreshQuiet(ctx)
	}
}

func (c *Client) deleteRecordsOnce(ctx context.Context, tp log.TopicPartition, req *kmsg.DeleteRecordsRequest) (int64, error) {
	bc, err := c.leader(ctx, tp, laneControl)
	if err != nil {
		return -1, err
	}
	resp, err := bc.do(ctx, req, clientDeleteRecordsMax)
	if err != nil {
		return -1, err
	}
	for _, t := range resp.(*kmsg.DeleteRecordsResponse).Topics {
		for _, p := range t.Partitions {
			if t.Topic == tp.Topic && int(p.Partition) == tp.Partition {
				if err := codeError(p.ErrorCode); err != nil {
					return -1, err
				}
				return p.LowWatermark, nil
			}
		}
	}
	return -1, codeError(errUnknownServerError)
}

// topicConfig is one config by Kafka's name and value.
type topicConfig struct{ name, value string }

// topicConfigsOf returns the configs set on cfg (its non-zero fields), by
// Kafka's names, sorted by name.
func topicConfigsOf(cfg log.TopicConfig) []topicConfig {
	var out []topicConfig
	for i := range topicConfigTable {
		d := &topicConfigTable[i]
		if d.isSetOn(cfg) {
			out = append(out, topicConfig{d.name, d.get(cfg)})
		}
	}
	return out
}

package kafka

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// ConfigChange is one config of an alteration: set to Value, or with
// Delete back to its default.
type ConfigChange struct {
	Name   string
	Value  string
	Delete bool
}

// ClusterDefaults, as a broker id, names the cluster-wide default of the
// dynamic broker configs (Kafka's BROKER resource "").
const ClusterDefaults = -1

// AlterBrokerConfigs changes dynamic broker configs with
// IncrementalAlterConfigs (kafka-configs.sh --entity-type brokers): of
// broker id, sent to that broker as Kafka wants, or of the cluster-wide
// defaults (id ClusterDefaults), sent to any. The replication throttles
// are among them on a cluster (LeaderThrottledRateConfig, ...).
// log.ErrInvalidConfig for an unknown or read-only config or a bad value;
// nothing changes then.
func (c *Client) AlterBrokerConfigs(ctx context.Context, id int, changes []ConfigChange) error {
	bc, err := c.brokerConnByID(ctx, id)
	if err != nil {
		return err
	}
	name := ""
	if id != ClusterDefaults {
		name = strconv.Itoa(id)
	}
	return c.alterConfigs(ctx, bc, kmsg.ConfigResourceTypeBroker, name, changes)
}

// AlterTopicConfigs changes a topic's configs with IncrementalAlterConfigs,
// the ones named only (log.ErrUnknownTopic, log.ErrInvalidConfig).
func (c *Client) AlterTopicConfigs(ctx context.Context, topic string, changes []ConfigChange) error {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return err
	}
	return c.alterConfigs(ctx, bc, kmsg.ConfigResourceTypeTopic, topic, changes)
}

func (c *Client) alterConfigs(ctx context.Context, bc *brokerConn, typ kmsg.ConfigResourceType, name string, changes []ConfigChange) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for _, ch := range changes {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op = ch.Name, opSet
		if ch.Delete {
			op.Op = opDelete
		} else {
			op.Value = kmsg.StringPtr(ch.Value)
		}
		rr.Configs = append(rr.Configs, op)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := bc.do(ctx, req, clientIncrementalAlterConfigsMax)
	if err != nil {
		return fmt.Errorf("kafka: alter configs of %s %q: %w", typ, name, err)
	}
	rs := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
	if len(rs) != 1 {
		return fmt.Errorf("kafka: alter configs of %s %q: %d resources answered", typ, name, len(rs))
	}
	return responseErr(rs[0].ErrorCode, rs[0].ErrorMessage)
}

// clientIncrementalAlterConfigsMax: v1 is flexible, and what the Client
// reads is in both.
const clientIncrementalAlterConfigsMax = 1

// brokerConnByID is the connection to broker id as the cluster's
// metadata names it (any broker for ClusterDefaults).
func (c *Client) brokerConnByID(ctx context.Context, id int) (*brokerConn, error) {
	bc, err := c.anyConn(ctx)
	if err != nil || id == ClusterDefaults {
		return bc, err
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: only brokers
	resp, err := bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout()))
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata: %w", err)
	}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		if int(b.NodeID) == id {
			return c.conn(ctx, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
	}
	return nil, fmt.Errorf("%w: no broker %d in the cluster's metadata", log.ErrInvalidConfig, id)
}

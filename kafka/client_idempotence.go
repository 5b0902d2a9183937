package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// clientInitProducerIDMax is the highest InitProducerId version the client
// sends (v2 and up are flexible; a non-transactional id needs nothing newer).
const clientInitProducerIDMax = 4

// InitProducerID asks any broker for a producer id and epoch, for an
// idempotent Producer (Kafka's InitProducerId without a transactional id),
// retrying within ctx while no broker answers (client_retry.go).
func (c *Client) InitProducerID(ctx context.Context) (log.ProducerID, error) {
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	r := retrier{ctx: ctx}
	for {
		pid, err := c.initProducerIDOnce(ctx)
		if err == nil {
			return pid, nil
		}
		if err := r.retry(err); err != nil {
			return log.ProducerID{}, err
		}
		c.refreshQuiet(ctx)
	}
}

func (c *Client) initProducerIDOnce(ctx context.Context) (log.ProducerID, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return log.ProducerID{}, err
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := bc.do(ctx, req, clientInitProducerIDMax)
	if err != nil {
		return log.ProducerID{}, fmt.Errorf("kafka: init producer id: %w", err)
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	if err := codeError(r.ErrorCode); err != nil {
		return log.ProducerID{}, fmt.Errorf("kafka: init producer id: %w", err)
	}
	return log.ProducerID{ID: r.ProducerID, Epoch: r.ProducerEpoch}, nil
}

package kafka

import (
	"context"
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// Request sends req to a broker of the cluster (any one it is connected
// to, or a seed) at the highest version that req, maxVersion and the
// broker all know, and returns the broker's response. It is for the
// requests the Client has no method for (topic administration, say); the
// caller reads the response at the version set on req. A response's
// error codes are the caller's to read: Request fails only when no broker
// answers, or for a nil req or a negative maxVersion
// (log.ErrInvalidRequest, nothing sent).
func (c *Client) Request(ctx context.Context, req kmsg.Request, maxVersion int16) (kmsg.Response, error) {
	if err := checkRequest(req, maxVersion); err != nil {
		return nil, err
	}
	bc, err := c.anyConn(ctx)
	if err != nil {
		return nil, err
	}
	return bc.do(ctx, req, maxVersion)
}

// RequestBroker is Request sent to the broker whose node id is broker, as
// the cluster's metadata names it: for the requests Kafka answers only on
// the broker they are about (DescribeConfigs or IncrementalAlterConfigs
// of a broker resource, DescribeLogDirs of its disks). A broker id the
// metadata does not name is log.ErrInvalidConfig.
func (c *Client) RequestBroker(ctx context.Context, broker int, req kmsg.Request, maxVersion int16) (kmsg.Response, error) {
	if err := checkRequest(req, maxVersion); err != nil {
		return nil, err
	}
	if broker < 0 {
		return nil, fmt.Errorf("%w: broker id %d", log.ErrInvalidConfig, broker)
	}
	bc, err := c.brokerConnByID(ctx, broker)
	if err != nil {
		return nil, err
	}
	return bc.do(ctx, req, maxVersion)
}

// checkRequest refuses what Request cannot send: a nil request (a nil
// interface or pointer, which encoding would dereference) or a negative
// version.
func checkRequest(req kmsg.Request, maxVersion int16) error {
	if v := reflect.ValueOf(req); req == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("%w: kafka: nil request", log.ErrInvalidRequest)
	}
	if maxVersion < 0 {
		return fmt.Errorf("%w: kafka: %s at version %d", log.ErrInvalidRequest, kmsg.NameForKey(req.Key()), maxVersion)
	}
	return nil
}

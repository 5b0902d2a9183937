package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerUnregisterer is a cluster member that removes a broker from the
// cluster's metadata (Kafka's UnregisterBroker, API key 64, for
// decommissioning). An unknown broker is an error that errors.Is
// ErrBrokerNotRegistered (BROKER_ID_NOT_REGISTERED); a broker that may not
// go yet — it still holds replicas — is one that wraps
// log.ErrInvalidRequest (INVALID_REQUEST).
type BrokerUnregisterer interface {
	UnregisterBroker(ctx context.Context, id int) error
}

// ErrBrokerNotRegistered is a BrokerUnregisterer's answer for a broker the
// cluster does not know.
var ErrBrokerNotRegistered = errors.New("kafka: broker not registered")

const (
	unregisterBrokerKey   int16 = 64
	brokerIDNotRegistered int16 = 102 // BROKER_ID_NOT_REGISTERED
	// unregisterTimeout bounds one UnregisterBroker (the request has no
	// timeout of its own): a controller change and its application here.
	unregisterTimeout = 30 * time.Second
)

var unregisterBrokerAPIs = []api{{key: unregisterBrokerKey, min: 0, max: 0, handle: handleUnregisterBroker}}

// handleUnregisterBroker removes a broker through the BrokerUnregisterer.
func handleUnregisterBroker(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	ctx, cancel := context.WithTimeout(ctx, unregisterTimeout)
	defer cancel()
	err := c.s.caps.unregister.UnregisterBroker(ctx, int(req.BrokerID))
	switch {
	case err == nil:
		return reply{resp: resp}
	case errors.Is(err, ErrBrokerNotRegistered):
		resp.ErrorCode = brokerIDNotRegistered
	default:
		resp.ErrorCode = errorCode(err)
	}
	resp.ErrorMessage = kmsg.StringPtr(err.Error())
	return reply{resp: resp}
}

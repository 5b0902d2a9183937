package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// ProducerIDBackend is what a Backend implements to serve InitProducerId:
// producer ids for idempotent producers (*log.Broker does).
type ProducerIDBackend interface {
	InitProducerID(ctx context.Context) (log.ProducerID, error)
}

const initProducerIDKey int16 = 22

// idempotenceAPIs are served when the backend hands out producer ids.
var idempotenceAPIs = []api{
	// A transactional id goes to its coordinator (txn.go), if the
	// backend runs one; without one, v3+ re-initialise a known id and
	// epoch (KIP-360), which is answered with a new id. v5 only adds
	// TRANSACTION_ABORTABLE to what may be answered.
	{key: initProducerIDKey, min: 0, max: 5, handle: handleInitProducerID},
}

func handleInitProducerID(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		initTxnProducerID(ctx, c, req, resp)
		return reply{resp: resp}
	}
	pid, err := c.s.caps.producerIDs.InitProducerID(ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return reply{resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = pid.ID, pid.Epoch
	return reply{resp: resp}
}

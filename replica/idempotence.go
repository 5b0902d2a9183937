package replica

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/log"
)

// ErrProducerIDsUnsupported: a cluster member does not hand out producer
// ids yet (they must be unique cluster-wide, which needs a controller record
// for id blocks), so idempotent producers cannot start on a cluster.
var ErrProducerIDsUnsupported = fmt.Errorf("replica: a cluster member does not allocate producer ids yet: %w", log.ErrInvalidConfig)

// InitProducerID fails with ErrProducerIDsUnsupported (see there).
func (b *Broker) InitProducerID(ctx context.Context) (log.ProducerID, error) {
	return log.ProducerID{}, ErrProducerIDsUnsupported
}

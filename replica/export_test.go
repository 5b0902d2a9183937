package replica

import (
	"context"
	"time"

	"github.com/strata-log/strata/kafka"
)

// KafkaBackend returns the member as its kafka.Server on Addr sees it, for
// the tests of what the server is given (brokers, leaders and ISRs, group
// coordinators).
func KafkaBackend(b *Broker) interface {
	kafka.ClusterBackend
	kafka.GroupRouter
} {
	return kafkaBackend{b}
}

// ThrottleBackend returns the member's replication throttles as its
// kafka.Server alters them.
func ThrottleBackend(b *Broker) kafka.ThrottleConfigBackend { return kafkaBackend{b} }

// WaitController waits until the member knows the active controller and
// returns its id.
func WaitController(ctx context.Context, b *Broker) (int, error) {
	id, _, err := b.ctl.WaitLeader(ctx)
	return id, err
}

// SetOrderWait sets how long a forwarded idempotent batch waits for the
// batches before it, for one test; the returned func restores it.
func SetOrderWait(d time.Duration) (restore func()) {
	old := orderWait
	orderWait = d
	return func() { orderWait = old }
}

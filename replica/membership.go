package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

var _ kafka.BrokerUnregisterer = kafkaBackend{}

// Voter reports whether this member is a controller voter (its ID is in
// Config.Peers); false: a broker only, which follows the metadata as a
// non-voter and votes in nothing.
func (b *Broker) Voter() bool { return b.ctl.Voter() }

// UnregisterBroker removes broker id from the cluster's metadata (Kafka's
// UnregisterBroker, API key 64): refused with
// controller.ErrBrokerHasReplicas while a partition lists it as a replica,
// controller.ErrUnknownBroker when it is not registered. A broker that
// is not a voter also leaves the controller's Raft configuration. It
// returns once the change is committed and applied on this member. Stop
// the broker first: one that still runs registers again, as in Kafka.
func (b *Broker) UnregisterBroker(ctx context.Context, id int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)()
	if err := b.ctl.UnregisterBroker(ctx, id); err != nil {
		return fmt.Errorf("replica: unregister broker %d: %w", id, controllerErr(err))
	}
	for {
		img := b.img.Load()
		if _, ok := img.Broker(id); !ok {
			return nil
		}
		if _, err := b.WaitImage(ctx, img.Version()); err != nil {
			return fmt.Errorf("replica: unregister broker %d: committed, not yet applied here: %w", id, err)
		}
	}
}

// UnregisterBroker is Broker.UnregisterBroker with the errors the Kafka
// server answers (kafka.BrokerUnregisterer).
func (b kafkaBackend) UnregisterBroker(ctx context.Context, id int) error {
	err := b.Broker.UnregisterBroker(ctx, id)
	switch {
	case errors.Is(err, controller.ErrUnknownBroker):
		return fmt.Errorf("%w: %w", kafka.ErrBrokerNotRegistered, err)
	case errors.Is(err, controller.ErrBrokerHasReplicas):
		return fmt.Errorf("%w: %w", log.ErrInvalidRequest, err)
	}
	return err
}

package log

import (
	"context"

	"github.com/strata-log/strata/group"
)

// GroupAdmin is the consumer group administration that *Broker and
// *kafka.Client share (Kafka's ListGroups and DeleteGroups), so a program's
// group admin code runs unchanged against an embedded broker or a
// Kafka-protocol cluster.
type GroupAdmin interface {
	// ListGroups returns every group the cluster's coordinators know,
	// sorted by id.
	ListGroups(ctx context.Context) ([]group.Listing, error)
	// DeleteGroup deletes a group without members and its committed
	// offsets (group.ErrNonEmptyGroup, group.ErrGroupNotFound).
	DeleteGroup(ctx context.Context, groupID string) error
}

var _ GroupAdmin = (*Broker)(nil)

// ListGroups returns every group the broker's coordinator knows, sorted by
// id (group.Coordinator.List).
func (b *Broker) ListGroups(ctx context.Context) ([]group.Listing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.groups.List(), nil
}

// DeleteGroup deletes a group without members and its committed offsets
// (group.Coordinator.Delete).
func (b *Broker) DeleteGroup(ctx context.Context, groupID string) error {
	return b.groups.Delete(ctx, groupID)
}

package replica

import (
	"context"

	"github.com/strata-log/strata/share"
)

// ShareCoordinatorOf returns a member's share coordinator, for tests.
func ShareCoordinatorOf(b *Broker) *share.Coordinator { return b.shares.c }

// PruneShareState prunes the partitions of __share_group_state b leads
// now, as its periodic pass does.
func PruneShareState(ctx context.Context, b *Broker) error { return b.pruneShareState(ctx) }

package replica

import "github.com/strata-log/strata/share"

// ShareCoordinatorOf returns a member's share coordinator, for tests.
func ShareCoordinatorOf(b *Broker) *share.Coordinator { return b.shares.c }

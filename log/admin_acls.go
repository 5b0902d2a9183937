package log

import (
	"context"

	"github.com/strata-log/strata/acl"
)

// ACLAdmin is the ACL administration that *Broker and *kafka.Client share
// (Kafka's CreateAcls, DescribeAcls, DeleteAcls), so a program's ACL code
// runs unchanged against an embedded broker or a Kafka-protocol cluster.
type ACLAdmin interface {
	// CreateACLs adds bindings: one error per binding (an invalid one,
	// acl.ErrInvalidBinding, is left out), or an error if none could be
	// added.
	CreateACLs(ctx context.Context, bs []acl.Binding) ([]error, error)
	// DescribeACLs returns the bindings f matches (acl.ErrInvalidFilter).
	DescribeACLs(ctx context.Context, f acl.Filter) ([]acl.Binding, error)
	// DeleteACLs removes the bindings each filter matches and returns
	// them per filter (acl.ErrInvalidFilter: nothing removed).
	DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, error)
}

var _ ACLAdmin = (*Broker)(nil)

// DescribeACLs returns the bindings of ACLs that f matches, sorted by
// resource (acl.ErrInvalidFilter).
func (b *Broker) DescribeACLs(_ context.Context, f acl.Filter) ([]acl.Binding, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return b.ACLs().Match(f), nil
}

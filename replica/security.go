package replica

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// Security on a cluster: the ACLs, the SCRAM credentials of users added at
// runtime and the client quotas are cluster metadata (controller,
// security.go), so every member enforces the same. The member's kafka
// backend has the capabilities a standalone broker has: CreateAcls,
// DeleteAcls, AlterUserScramCredentials and AlterClientQuotas sent to any
// member go to the active controller, and the member answers once it has
// applied the change itself (a Describe sent to it next sees it); the
// Describe APIs, every authorization check, every SCRAM login and every
// quota lookup read the member's own metadata image (an atomic load).
//
// Config.Authorizer turns authorization on for the client listeners
// (Config.Listeners). Addr, the inter-broker listener, is the members'
// own: replication and forwarded calls, from holders of a certificate of
// the cluster's CA (Config.TLS); it checks no ACLs.

var (
	_ kafka.ACLBackend   = kafkaBackend{}
	_ kafka.SCRAMBackend = kafkaBackend{}
	_ kafka.QuotaBackend = kafkaBackend{}
)

// validateSecurity: an authorizer guards client listeners, so it needs one.
func (c Config) validateSecurity() error {
	if c.Authorizer != nil && len(c.Listeners) == 0 {
		return fmt.Errorf("%w: replica: Authorizer checks the client listeners, and there are none (Addr is the members' own)", ErrInvalidConfig)
	}
	if c.Authorizer != nil {
		for _, p := range c.Authorizer.SuperUsers {
			if _, _, err := acl.ParsePrincipal(p); err != nil {
				return fmt.Errorf("%w: replica: super user: %v", ErrInvalidConfig, err)
			}
		}
	}
	return nil
}

// securityContext bounds a change by ctx, Config.ProduceTimeout and Close.
func (b kafkaBackend) securityContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProduceTimeout)
	stop := context.AfterFunc(b.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// applied waits until this member has applied version (0: nothing was
// committed), so that what it answers next includes the change.
func (b kafkaBackend) applied(ctx context.Context, version uint64) error {
	if version == 0 {
		return nil
	}
	_, err := b.WaitImage(ctx, version-1)
	return err
}

// ACLs is the cluster's ACLs as this member has applied them
// (kafka.ACLBackend).
func (b kafkaBackend) ACLs() *acl.Set { return b.img.Load().ACLs() }

// CreateACLs adds bindings through the active controller
// (kafka.ACLBackend).
func (b kafkaBackend) CreateACLs(ctx context.Context, bs []acl.Binding) ([]error, error) {
	ctx, cancel := b.securityContext(ctx)
	defer cancel()
	errs, v, err := b.ctl.CreateACLs(ctx, bs)
	if err != nil {
		return nil, controllerErr(err)
	}
	return errs, b.applied(ctx, v)
}

// DeleteACLs removes the bindings the filters match through the active
// controller (kafka.ACLBackend).
func (b kafkaBackend) DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, error) {
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := b.securityContext(ctx)
	defer cancel()
	deleted, v, err := b.ctl.DeleteACLs(ctx, fs)
	if err != nil {
		return nil, controllerErr(err)
	}
	return deleted, b.applied(ctx, v)
}

// SCRAMCredential is user's runtime credential for mechanism as this
// member has applied it (kafka.SCRAMBackend).
func (b kafkaBackend) SCRAMCredential(mechanism, user string) (log.SCRAMCredential, bool) {
	return b.img.Load().SCRAMCredential(mechanism, user)
}

// SCRAMUsers lists the runtime SCRAM users (kafka.SCRAMBackend).
func (b kafkaBackend) SCRAMUsers() []log.SCRAMUser { return b.img.Load().SCRAMUsers() }

// AlterSCRAMCredentials applies credential changes through the active
// controller (kafka.SCRAMBackend).
func (b kafkaBackend) AlterSCRAMCredentials(ctx context.Context, changes []log.SCRAMChange) (map[string]error, error) {
	ctx, cancel := b.securityContext(ctx)
	defer cancel()
	failed, v, err := b.ctl.AlterSCRAMCredentials(ctx, changes)
	if err != nil {
		return nil, controllerErr(err)
	}
	return failed, b.applied(ctx, v)
}

// ClientQuotas is the cluster's client quotas as this member has applied
// them (kafka.QuotaBackend).
func (b kafkaBackend) ClientQuotas() *log.QuotaSet { return b.img.Load().ClientQuotas() }

// AlterClientQuotas applies quota alterations through the active
// controller; validateOnly checks them here and changes nothing
// (kafka.QuotaBackend).
func (b kafkaBackend) AlterClientQuotas(ctx context.Context, as []log.QuotaAlteration, validateOnly bool) ([]error, error) {
	if validateOnly {
		errs := make([]error, len(as))
		for i, a := range as {
			errs[i] = a.Validate()
		}
		return errs, nil
	}
	ctx, cancel := b.securityContext(ctx)
	defer cancel()
	errs, v, err := b.ctl.AlterClientQuotas(ctx, as)
	if err != nil {
		return nil, controllerErr(err)
	}
	return errs, b.applied(ctx, v)
}

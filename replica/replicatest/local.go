// Package replicatest holds test fixtures for package replica: an
// in-process network of cluster members whose links a test can cut and
// heal.
package replicatest

import "github.com/strata-log/strata/replica/internal/transport"

// LocalNetwork connects the members of one process (replica.Config.Local):
// each member calls the others directly, through links a test can cut and
// heal. A cut link fails new calls at once with replica.ErrUnreachable and
// ends the calls in flight on it. Record batches cross it as handles on the
// leader's segment files, as sendfile would send them.
type LocalNetwork = transport.LocalNetwork

// NewLocalNetwork returns an empty network.
func NewLocalNetwork() *LocalNetwork { return transport.NewLocalNetwork() }

package controller

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/raft"
)

// QuorumMember is one server of the controller's Raft configuration.
type QuorumMember struct {
	ID       int
	RaftAddr string
	Voter    bool // false: a broker only (a Raft non-voter)
}

// Members returns the Raft configuration as this member knows it (the
// latest, committed or not): the voters and the brokers that follow the
// metadata as non-voters, in configuration order.
func (c *Controller) Members() ([]QuorumMember, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("controller: raft configuration: %w", err)
	}
	var out []QuorumMember
	for _, s := range f.Configuration().Servers {
		id, err := strconv.Atoi(string(s.ID))
		if err != nil {
			return nil, fmt.Errorf("%w: raft server id %q", ErrCorrupt, s.ID)
		}
		out = append(out, QuorumMember{ID: id, RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/share"
)

// join joins the group with the first Poll and starts the heartbeats.
func (c *ShareConsumer) join(ctx context.Context) error {
	c.mu.Lock()
	closed, joined := c.closed, c.stop != nil
	c.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("log: share consumer: %w", ErrClosed)
	case joined:
		return nil
	}
	if err := c.heartbeat(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	hctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel // by Close, with stop
	go c.heartbeats(hctx, c.stop, c.done)
	return nil
}

// heartbeat sends one heartbeat: a join when the member is not in the
// group (epoch 0), and takes the answer's epoch and assignment.
func (c *ShareConsumer) heartbeat(ctx context.Context) error {
	c.mu.Lock()
	req := share.HeartbeatRequest{Group: c.cfg.Group, MemberID: c.member, MemberEpoch: c.epoch, ClientID: c.cfg.ClientID}
	if c.epoch == 0 {
		req.SubscribedTopics = c.cfg.Topics
	}
	c.mu.Unlock()
	resp, err := c.client.ShareHeartbeat(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if errors.Is(err, group.ErrUnknownMember) || errors.Is(err, group.ErrFencedMemberEpoch) {
			// Out of the group (its session timed out): join again, with
			// nothing assigned meanwhile.
			c.epoch, c.assigned = 0, nil
		}
		return fmt.Errorf("log: share consumer: heartbeat: %w", err)
	}
	c.epoch = resp.MemberEpoch
	if resp.HeartbeatInterval > 0 {
		c.interval = resp.HeartbeatInterval
	}
	if resp.Assignment != nil {
		c.assigned = slices.Clone(resp.Assignment)
	}
	return nil
}

// heartbeats heartbeats every interval until stop.
func (c *ShareConsumer) heartbeats(ctx context.Context, stop, done chan struct{}) {
	defer close(done)
	for {
		c.mu.Lock()
		d := c.interval
		c.mu.Unlock()
		if d <= 0 {
			d = share.DefaultHeartbeatInterval
		}
		t := time.NewTimer(d)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("log: share consumer: heartbeat", "group", c.cfg.Group, "member", c.member, "err", err)
		}
	}
}

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

// join joins the group with the first Poll and starts the heartbeats, or
// joins again after the member left for MaxPollInterval.
func (c *ShareConsumer) join(ctx context.Context) error {
	c.mu.Lock()
	closed, joined := c.closed, c.stop != nil
	c.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("log: share consumer: %w", ErrClosed)
	case joined:
		c.hbMu.Lock()
		defer c.hbMu.Unlock()
		c.mu.Lock()
		left := c.left
		c.mu.Unlock()
		if !left {
			return nil
		}
		if err := c.heartbeat(ctx); err != nil { // epoch 0: a join
			return err
		}
		c.mu.Lock()
		c.left = false
		c.mu.Unlock()
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

// heartbeats heartbeats every interval until stop, and leaves the group
// once the member was not polled for MaxPollInterval (Kafka's poll
// timer): no heartbeat then until the next Poll joins again.
func (c *ShareConsumer) heartbeats(ctx context.Context, stop, done chan struct{}) {
	defer close(done)
	for {
		c.mu.Lock()
		d := c.interval
		if d <= 0 {
			d = share.DefaultHeartbeatInterval
		}
		if !c.left {
			d = min(d, max(time.Until(c.polled.Add(c.cfg.MaxPollInterval)), 0))
		}
		c.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		if err := c.beat(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("log: share consumer: heartbeat", "group", c.cfg.Group, "member", c.member, "err", err)
		}
	}
}

// beat is the heartbeats' turn: a heartbeat, a leave once the member was
// not polled for MaxPollInterval, nothing while it is out of the group
// for that.
func (c *ShareConsumer) beat(ctx context.Context) error {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	c.mu.Lock()
	left, epoch := c.left, c.epoch
	stale := !left && epoch != 0 && time.Since(c.polled) >= c.cfg.MaxPollInterval
	if stale {
		// Out of the group from now on: a Poll meanwhile joins again
		// (after this leave, hbMu) and fetches nothing until then.
		c.left, c.epoch, c.assigned = true, 0, nil
	}
	c.mu.Unlock()
	switch {
	case left:
		return nil
	case !stale:
		return c.heartbeat(ctx)
	}
	c.cfg.Logger.Warn("log: share consumer: not polled for MaxPollInterval: leaving the group", "group", c.cfg.Group, "member", c.member, "maxPollInterval", c.cfg.MaxPollInterval)
	_, err := c.client.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: c.cfg.Group, MemberID: c.member, MemberEpoch: -1, ClientID: c.cfg.ClientID})
	if err != nil {
		return fmt.Errorf("log: share consumer: leave: %w", err)
	}
	return nil
}

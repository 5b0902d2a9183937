package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
)

// topicConfigKey is the key of TopicSpec.Configs under which a topic's
// log.TopicConfig travels through the controller, as JSON.
const topicConfigKey = "strata.topic.config"

func encodeTopicConfig(cfg log.TopicConfig) map[string]string {
	raw, _ := json.Marshal(cfg)
	return map[string]string{topicConfigKey: string(raw)}
}

func topicConfigOf(t controller.TopicInfo) log.TopicConfig {
	var cfg log.TopicConfig
	if raw, ok := t.Configs[topicConfigKey]; ok {
		_ = json.Unmarshal([]byte(raw), &cfg)
	}
	cfg.Partitions = len(t.Partitions)
	cfg.ReplicationFactor = t.ReplicationFactor()
	cfg.MinInSyncReplicas = t.MinInSyncReplicas
	return cfg
}

// watchMetadata applies every metadata image this member's controller
// applies, in order, until Close.
func (b *Broker) watchMetadata() {
	defer b.wg.Done()
	img := b.ctl.Image()
	for {
		b.apply(img)
		next, err := b.ctl.Wait(b.ctx, img.Version())
		if err != nil {
			if b.ctx.Err() != nil || errors.Is(err, controller.ErrClosed) {
				return
			}
			b.log.Warn("replica: wait for metadata", "err", err)
			if !b.sleep(b.cfg.HeartbeatInterval / 4) {
				return
			}
			continue
		}
		img = next
	}
}

// apply brings the replicas of this member in line with img: creates the
// ones it should hold, makes each leader or follower, removes the ones of
// deleted topics (or that moved away).
func (b *Broker) apply(img *controller.Image) {
	fenced := map[int]bool{}
	for _, bi := range img.Brokers() {
		if bi.Fenced {
			fenced[bi.ID] = true
		}
	}
	b.applyThrottleRates(img) // throttle_config.go
	seen := map[log.TopicPartition]bool{}
	for _, name := range img.Topics() {
		t, _ := img.Topic(name)
		cfg := topicConfigOf(t)
		throttles := topicThrottlesOf(t.Configs)
		for _, st := range t.Partitions {
			if !slices.Contains(st.Replicas, b.cfg.ID) {
				continue
			}
			tp := log.TopicPartition{Topic: name, Partition: st.Partition}
			seen[tp] = true
			ps := b.part(tp)
			if ps != nil && ps.topicID != t.ID {
				b.removePart(ps, img) // deleted and created again
				ps = nil
			}
			if ps == nil {
				var err error
				if ps, err = b.openPart(tp, t.ID, cfg); err != nil {
					b.log.Error("replica: open partition", "partition", tp, "err", err)
					continue
				}
			}
			ps.throttle.Store(throttles.flags(st.Partition, b.cfg.ID))
			b.applyTopicConfig(ps, cfg) // admin_configs.go
			b.applyPartition(ps, st, t.MinInSyncReplicas, fenced)
		}
	}
	b.mu.RLock()
	var gone []*partState
	for tp, ps := range b.parts {
		if !seen[tp] {
			gone = append(gone, ps)
		}
	}
	b.mu.RUnlock()
	for _, ps := range gone {
		b.removePart(ps, img)
	}
	b.img.Store(img)
	b.syncCoordinator()
	b.syncTxnCoordinators()
	b.metaApplied()
}

func (b *Broker) openPart(tp log.TopicPartition, id controller.TopicID, cfg log.TopicConfig) (*partState, error) {
	p, ok := b.store.Partition(tp.Topic, tp.Partition)
	if !ok {
		var err error
		dir := filepath.Join(b.store.Dir(), fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		if _, serr := os.Stat(dir); serr == nil {
			p, err = b.store.OpenPartition(tp.Topic, tp.Partition, cfg)
		} else {
			p, err = b.store.CreatePartition(tp.Topic, tp.Partition, cfg)
		}
		if err != nil {
			return nil, err
		}
	}
	ps := &partState{
		tp: tp, topicID: id, p: p,
		pm:      machine.NewPartitionMachine(b.cfg.ID, logEpochs{p}, machine.PartitionConfig{ReplicaLagTime: b.cfg.ReplicaLagTime}),
		fm:      machine.NewFollowerMachine(logEpochs{p}),
		waiters: map[uint64]chan error{},
	}
	b.mu.Lock()
	b.parts[tp] = ps
	b.mu.Unlock()
	return ps, nil
}

// removePart removes this member's replica ps: its topic is gone from
// img, or a reassignment moved the replica away. Produces waiting on it
// fail with log.ErrUnknownTopic, or log.ErrNotLeader when the partition
// lives on elsewhere (its clients retry on the new leader).
func (b *Broker) removePart(ps *partState, img *controller.Image) {
	waitErr := fmt.Errorf("%w: %s-%d", log.ErrUnknownTopic, ps.tp.Topic, ps.tp.Partition)
	if t, ok := img.Topic(ps.tp.Topic); ok && t.ID == ps.topicID {
		waitErr = fmt.Errorf("%w: %s-%d moved off broker %d", log.ErrNotLeader, ps.tp.Topic, ps.tp.Partition, b.cfg.ID)
	}
	b.mu.Lock()
	if b.parts[ps.tp] == ps {
		delete(b.parts, ps.tp)
	}
	b.mu.Unlock()
	ps.mu.Lock()
	ps.removed = true
	ps.leading.Store(false)
	ps.fm.Stop()
	b.stopFollowing(ps)
	for tok, ch := range ps.waiters {
		ch <- waitErr
		delete(ps.waiters, tok)
	}
	ps.mu.Unlock()
	if err := b.store.RemovePartition(ps.tp.Topic, ps.tp.Partition); err != nil {
		b.log.Error("replica: remove partition", "partition", ps.tp, "err", err)
	}
}

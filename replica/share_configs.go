package replica

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

// Share groups' configs in a cluster (share.auto.offset.reset,
// share.record.lock.duration.ms, share.delivery.count.limit), which
// Kafka keeps in its cluster metadata: a member that alters one
// (IncrementalAlterConfigs on the group, any member) writes it to
// partition 0 of __share_group_state, as a record of its own
// (shareConfigKeyVersion: the share coordinator's loads skip it), with
// acks=all before it answers; every member follows that partition and
// applies the configs it reads, so that the leaders of the group's
// partitions and a DescribeConfigs at any member see them.

// shareConfigKeyVersion is the key version of a group's config record
// (Kafka's share coordinator uses 0 and 1): then the group id as an int16
// length and its bytes. The value is JSON (shareConfigValue); null: the
// group's configs are deleted.
const shareConfigKeyVersion = 0x7f00

type shareConfigValue struct {
	AutoOffsetReset    string `json:"autoOffsetReset,omitempty"`
	LockDurationMs     int64  `json:"lockDurationMs,omitempty"`
	DeliveryCountLimit int    `json:"deliveryCountLimit,omitempty"`
}

func shareConfigKey(group string) []byte {
	k := binary.BigEndian.AppendUint16(nil, shareConfigKeyVersion)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

// decodeShareConfig decodes a config record; false for another record.
func decodeShareConfig(key, value []byte) (string, share.GroupConfig, bool) {
	if len(key) < 4 || binary.BigEndian.Uint16(key) != shareConfigKeyVersion || int(binary.BigEndian.Uint16(key[2:]))+4 != len(key) {
		return "", share.GroupConfig{}, false
	}
	g := string(key[4:])
	if value == nil {
		return g, share.GroupConfig{}, true
	}
	var v shareConfigValue
	if json.Unmarshal(value, &v) != nil {
		return "", share.GroupConfig{}, false
	}
	return g, share.GroupConfig{AutoOffsetReset: v.AutoOffsetReset, LockDuration: time.Duration(v.LockDurationMs) * time.Millisecond, DeliveryCountLimit: v.DeliveryCountLimit}, true
}

// storeShareConfigs writes the configs of the groups whose configs
// differ from those read from the log (share.Config.StoreGroupConfigs),
// as acks=all produces to partition 0 of __share_group_state.
func (b *Broker) storeShareConfigs(all map[string]share.GroupConfig) error {
	s := &b.shares
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	var bd batch.Builder
	now := time.Now().UnixMilli()
	bd.Reset(now)
	n := 0
	for g := range s.configs {
		if _, ok := all[g]; !ok {
			bd.Append(now, shareConfigKey(g), nil, nil)
			n++
		}
	}
	for g, gc := range all {
		if old, ok := s.configs[g]; ok && old == gc {
			continue
		}
		v, _ := json.Marshal(shareConfigValue{AutoOffsetReset: gc.AutoOffsetReset, LockDurationMs: gc.LockDuration.Milliseconds(), DeliveryCountLimit: gc.DeliveryCountLimit})
		bd.Append(now, shareConfigKey(g), v, nil)
		n++
	}
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.ProduceTimeout)
	defer cancel()
	if err := b.ensureShareStateTopic(ctx); err != nil {
		return err
	}
	if _, err := b.Produce(ctx, log.TopicPartition{Topic: log.ShareStateTopic, Partition: 0}, bd.Bytes(), log.AcksAll); err != nil {
		return fmt.Errorf("replica: store share group configs: %w", err)
	}
	s.configs = maps.Clone(all)
	return nil
}

// followShareConfigs reads partition 0 of __share_group_state from its
// start, as it grows, and applies the group configs it holds, until
// Close.
func (b *Broker) followShareConfigs() {
	tp := log.TopicPartition{Topic: log.ShareStateTopic, Partition: 0}
	off := int64(0)
	for b.ctx.Err() == nil {
		ch := b.metaWatch()
		if _, ok := b.img.Load().PartitionCount(log.ShareStateTopic); !ok {
			select {
			case <-ch:
			case <-b.ctx.Done():
			}
			continue
		}
		resp, err := b.Fetch(b.ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: tp, Offset: off}}, MinBytes: 1, MaxWait: time.Second})
		if err != nil {
			if b.ctx.Err() == nil {
				b.log.Debug("replica: follow share group configs", "err", err)
				b.sleep(50 * time.Millisecond)
			}
			continue
		}
		fp := resp.Partitions[0]
		if oor := (*log.OffsetOutOfRangeError)(nil); errors.As(fp.Err, &oor) && off < fp.LogStartOffset {
			resp.Release()
			off = fp.LogStartOffset // pruned (share_prune.go): what is gone was superseded
			continue
		}
		var raw []byte
		if fp.Err == nil {
			raw, err = fp.Records.Bytes()
		}
		resp.Release()
		if fp.Err != nil || err != nil {
			b.log.Debug("replica: follow share group configs", "err", fp.Err, "read", err)
			b.sleep(50 * time.Millisecond)
			continue
		}
		_ = batch.Batches(raw, func(bt []byte, h batch.Header) error {
			_ = batch.Records(bt, h, func(r *batch.Record) error {
				if r.Offset >= off {
					if g, gc, ok := decodeShareConfig(r.Key, r.Value); ok {
						b.applyShareConfig(g, gc)
					}
				}
				return nil
			})
			off = max(off, h.NextOffset())
			return nil
		})
	}
}

// applyShareConfig applies a group's config read from the log.
func (b *Broker) applyShareConfig(g string, gc share.GroupConfig) {
	s := &b.shares
	s.cfgMu.Lock()
	if s.configs == nil {
		s.configs = map[string]share.GroupConfig{}
	}
	if gc == (share.GroupConfig{}) {
		delete(s.configs, g)
	} else {
		s.configs[g] = gc
	}
	s.cfgMu.Unlock()
	// SetGroupConfig stores nothing: storeShareConfigs finds no change.
	if err := s.c.SetGroupConfig(g, gc); err != nil {
		b.log.Warn("replica: apply share group config", "group", g, "err", err)
	}
}

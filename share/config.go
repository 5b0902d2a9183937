package share

import (
	"fmt"
	"time"
)

// Kafka's defaults for share groups.
const (
	// DefaultLockDuration is share.record.lock.duration.ms (group config;
	// the broker's group.share.record.lock.duration.ms).
	DefaultLockDuration = 30 * time.Second
	// DefaultDeliveryCountLimit is share.delivery.count.limit
	// (group.share.delivery.count.limit).
	DefaultDeliveryCountLimit = 5
	// DefaultMaxInFlight is group.share.partition.max.record.locks: the
	// most in-flight records of a share-partition.
	DefaultMaxInFlight = 2000
)

// OffsetReset is share.auto.offset.reset: where a share-partition with no
// state starts.
type OffsetReset int8

// The offset resets.
const (
	ResetLatest   OffsetReset = iota // at the log's end: only new records (Kafka's default)
	ResetEarliest                    // at the log's start
)

func (r OffsetReset) String() string {
	if r == ResetEarliest {
		return "earliest"
	}
	return "latest"
}

// ParseOffsetReset parses "latest" or "earliest" (ErrInvalidConfig
// otherwise).
func ParseOffsetReset(s string) (OffsetReset, error) {
	switch s {
	case "latest":
		return ResetLatest, nil
	case "earliest":
		return ResetEarliest, nil
	}
	return 0, fmt.Errorf("%w: share.auto.offset.reset %q (latest or earliest)", ErrInvalidConfig, s)
}

// PartitionConfig is what a share-partition takes from its group's
// configuration. The zero value of a field means its default.
type PartitionConfig struct {
	// LockDuration is how long an acquired record stays with its member
	// without being acknowledged or renewed (share.record.lock.duration.ms,
	// 30 s; Kafka allows 1 s to 1 h).
	LockDuration time.Duration
	// DeliveryCountLimit is how many times a record is delivered before
	// a release or an expired lock archives it (share.delivery.count.limit,
	// 5; Kafka allows 2 to 10).
	DeliveryCountLimit int
	// MaxInFlight bounds the in-flight records of a share-partition
	// (group.share.partition.max.record.locks, 2000): no record past the
	// end is acquired while there are as many.
	MaxInFlight int
}

func (c PartitionConfig) withDefaults() PartitionConfig {
	if c.LockDuration == 0 {
		c.LockDuration = DefaultLockDuration
	}
	if c.DeliveryCountLimit == 0 {
		c.DeliveryCountLimit = DefaultDeliveryCountLimit
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	return c
}

func (c PartitionConfig) validate() error {
	c = c.withDefaults()
	switch {
	case c.LockDuration < time.Millisecond:
		return fmt.Errorf("%w: lock duration %v", ErrInvalidConfig, c.LockDuration)
	case c.DeliveryCountLimit < 1 || c.DeliveryCountLimit > 1<<15-1:
		return fmt.Errorf("%w: delivery count limit %d", ErrInvalidConfig, c.DeliveryCountLimit)
	case c.MaxInFlight < 1 || c.MaxInFlight > maxWindow:
		return fmt.Errorf("%w: max in-flight records %d", ErrInvalidConfig, c.MaxInFlight)
	}
	return nil
}

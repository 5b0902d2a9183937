package group

import (
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/strata-log/strata/clock"
)

// Config configures a Coordinator. The zero value of every field but
// Partitions means its default.
type Config struct {
	// Store makes commits durable; nil → commits live in memory only (a
	// test fixture, or a broker that does not keep offsets).
	Store OffsetStore
	// Partitions returns the partition count of a topic. It is called by
	// Join, before the request reaches the group and with no lock held; an
	// error means the topic is unknown and nothing of it is assigned.
	// Required.
	Partitions func(topic string) (int, error)
	// Initial holds the committed offsets the coordinator starts with, by
	// group: what the broker read back from __consumer_offsets at open.
	// Negative offsets (tombstones) are ignored. The maps are copied.
	Initial map[string]map[TopicPartition]int64
	// InitialGroups holds the groups' metadata the coordinator starts with:
	// by group, the value of its latest group metadata record in
	// __consumer_offsets (what a GroupMetadataStore stored), which the
	// broker read back at open. Each group with members comes back Stable
	// in its generation, with its members, whose sessions start anew. A
	// value that does not decode is logged and ignored; the bytes are not
	// retained.
	InitialGroups map[string][]byte
	// Clock measures session and rebalance timeouts; nil → the system clock.
	Clock Clock
	// MinSessionTimeout and MaxSessionTimeout bound a JoinRequest's
	// SessionTimeout; 0 → 6 s and 30 min (Kafka's
	// group.min.session.timeout.ms and group.max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay holds the first rebalance of an empty group open
	// for that long after each new member's join (up to the rebalance
	// timeout), so that a fleet starting together forms one generation
	// instead of several. 0 → none: Kafka's group.initial.rebalance.delay.ms
	// is 3 s, but Strata's members usually start in-process, together, and a
	// unit test should not wait 3 s for its first assignment.
	InitialRebalanceDelay time.Duration
	// MaxSize is the most members a group may have (Kafka's
	// group.max.size): a new member's Join past it — counting the member
	// ids handed out with ErrMemberIDRequired and not joined with yet — is
	// refused with ErrGroupMaxSizeReached. A static member's restart and a
	// known member's rejoin always pass. 0 → Kafka's default, 2147483647.
	// A group restored larger (InitialGroups, Open) keeps its members;
	// Kafka would rebalance it and drop those past the bound.
	MaxSize int
	// MaxMemberMetadataBytes bounds what a Join may make the coordinator
	// keep for a member: the names and metadata of its protocols together
	// (ErrInvalidRequest past it). Kafka bounds them only by the request
	// size (socket.request.max.bytes, 100 MiB); a consumer's subscription
	// is its topics' names and, for the sticky assignors, the partitions it
	// owns, far below this. 0 → DefaultMaxMemberMetadataBytes (1 MiB).
	MaxMemberMetadataBytes int
	// Logger receives the coordinator's log lines (rebalances, removed
	// members); nil → discard.
	Logger *slog.Logger

	// Consumer-protocol groups (KIP-848, ConsumerHeartbeat).
	//
	// ConsumerSessionTimeout is how long a member stays without a
	// heartbeat (group.consumer.session.timeout.ms); 0 → 45 s.
	// ConsumerHeartbeatInterval is how often members are told to
	// heartbeat (group.consumer.heartbeat.interval.ms); 0 → 5 s.
	// ConsumerMaxSize bounds a group's members
	// (group.consumer.max.size); 0 → no bound.
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	ConsumerMaxSize           int
	// TopicNames lists the topics a subscription by regular expression
	// may match: every topic, internal ones included, as Kafka resolves a
	// regex against its whole metadata image; nil → such subscriptions
	// match nothing. Called with no lock held.
	TopicNames func() []string

	// consumerGroups are the consumer groups Open read back.
	consumerGroups map[string]*consumerGroup
}

// Clock is the time seam of a Coordinator: the two methods of a
// [clock.Clock] it uses. The system clock by default, a fake one in tests
// (clocktest.Clock, or grouptest.Clock, the same) or the broker's own. Any
// clock.Clock is a Clock. Its timers must keep working until the
// Coordinator's Close returns: Close waits for every timer it armed either
// to be stopped or to have run its f, so close the Coordinator before
// stopping the clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed, in a goroutine of its own (as
	// time.AfterFunc does) or, for a fake clock, from the call that advances
	// it — never from within AfterFunc itself: the Coordinator calls
	// AfterFunc holding its lock, and f takes it.
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper stops a timer made by Clock.AfterFunc. Stop reports whether it
// stopped the timer before f was called; after a true result f is never
// called, after a false one f is running or has run. Stop must not wait
// for a running f (the Coordinator calls it holding the lock f takes).
// *time.Timer and *timingwheel.Timer are Stoppers.
type Stopper = clock.Stopper

var _ Clock = clock.Clock(nil) // every clock.Clock is a Clock

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	c.MinSessionTimeout, c.MaxSessionTimeout = c.sessionBounds()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.MaxMemberMetadataBytes == 0 {
		c.MaxMemberMetadataBytes = DefaultMaxMemberMetadataBytes
	}
	if c.Initial != nil {
		initial := make(map[string]map[TopicPartition]int64, len(c.Initial))
		for g, offs := range c.Initial {
			initial[g] = maps.Clone(offs)
		}
		c.Initial = initial
	}
	return c
}

// DefaultMaxSize is Kafka's group.max.size default.
const DefaultMaxSize = 1<<31 - 1

// DefaultMaxMemberMetadataBytes is Config.MaxMemberMetadataBytes's default.
const DefaultMaxMemberMetadataBytes = 1 << 20

// Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms.
const (
	defaultMinSessionTimeout = 6 * time.Second
	defaultMaxSessionTimeout = 30 * time.Minute
)

// sessionBounds are the session timeout bounds once defaulted: a zero
// field takes its default, so that either bound may be set alone.
func (c Config) sessionBounds() (lo, hi time.Duration) {
	lo, hi = c.MinSessionTimeout, c.MaxSessionTimeout
	if lo == 0 {
		lo = defaultMinSessionTimeout
	}
	if hi == 0 {
		hi = defaultMaxSessionTimeout
	}
	return lo, hi
}

// validate checks the caller's cfg, before withDefaults: a zero field is
// judged by the default it stands for (a MinSessionTimeout above 6 s with
// no MaxSessionTimeout is valid; one above 30 min is not).
func (c Config) validate() error {
	lo, hi := c.sessionBounds()
	switch {
	case c.Partitions == nil:
		return fmt.Errorf("%w: Partitions is required", ErrInvalidConfig)
	case c.MinSessionTimeout < 0 || c.MaxSessionTimeout < 0 || c.InitialRebalanceDelay < 0:
		return fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	case c.ConsumerSessionTimeout < 0 || c.ConsumerHeartbeatInterval < 0 || c.ConsumerMaxSize < 0:
		return fmt.Errorf("%w: negative consumer group setting", ErrInvalidConfig)
	case c.MaxSize < 0 || c.MaxMemberMetadataBytes < 0:
		return fmt.Errorf("%w: negative MaxSize %d or MaxMemberMetadataBytes %d", ErrInvalidConfig, c.MaxSize, c.MaxMemberMetadataBytes)
	case lo > hi:
		return fmt.Errorf("%w: MinSessionTimeout %v > MaxSessionTimeout %v", ErrInvalidConfig, lo, hi)
	}
	return nil
}

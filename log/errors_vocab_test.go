package log_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/timingwheel"
)

// TestErrorVocabulary: log's sentinels are the public set. Every other
// package's sentinel for one of their conditions matches log's with
// errors.Is, wrapped or not, and keeps its own text.
func TestErrorVocabulary(t *testing.T) {
	cases := []struct {
		name string
		err  error // another package's sentinel
		is   error // log's
	}{
		{"segment.ErrClosed", segment.ErrClosed, log.ErrClosed},
		{"index.ErrClosed", index.ErrClosed, log.ErrClosed},
		{"group.ErrClosed", group.ErrClosed, log.ErrClosed},
		{"controller.ErrClosed", controller.ErrClosed, log.ErrClosed},
		{"timingwheel.ErrInvalidConfig", timingwheel.ErrInvalidConfig, log.ErrInvalidConfig},
		{"group.ErrInvalidConfig", group.ErrInvalidConfig, log.ErrInvalidConfig},
		{"kafka.ErrInvalidConfig", kafka.ErrInvalidConfig, log.ErrInvalidConfig},
		{"controller.ErrInvalidConfig", controller.ErrInvalidConfig, log.ErrInvalidConfig},
		{"group.ErrInvalidRequest", group.ErrInvalidRequest, log.ErrInvalidRequest},
		{"controller.ErrInvalidRequest", controller.ErrInvalidRequest, log.ErrInvalidRequest},
		{"batch.ErrCorrupt", batch.ErrCorrupt, log.ErrCorrupt},
		{"index.ErrCorruptIndex", index.ErrCorruptIndex, log.ErrCorrupt},
		{"group.ErrCorruptOffsetRecord", group.ErrCorruptOffsetRecord, log.ErrCorrupt},
		{"controller.ErrCorrupt", controller.ErrCorrupt, log.ErrCorrupt},
		{"log.ErrCorruptSnapshot", log.ErrCorruptSnapshot, log.ErrCorrupt},
		{"controller.ErrUnknownTopic", controller.ErrUnknownTopic, log.ErrUnknownTopic},
		{"controller.ErrUnknownPartition", controller.ErrUnknownPartition, log.ErrUnknownPartition},
		{"controller.ErrTopicExists", controller.ErrTopicExists, log.ErrTopicExists},
		{"controller.ErrInvalidTopic", controller.ErrInvalidTopic, log.ErrInvalidTopic},
		{"controller.ErrInvalidPartitions", controller.ErrInvalidPartitions, log.ErrInvalidPartitions},
		{"controller.ErrInvalidReplicationFactor", controller.ErrInvalidReplicationFactor, log.ErrInvalidReplicationFactor},
		{"controller.ErrNotPartitionLeader", controller.ErrNotPartitionLeader, log.ErrNotLeader},
		{"controller.ErrProducerIDsExhausted", controller.ErrProducerIDsExhausted, log.ErrProducerIDsExhausted},
		// Aliases: the same value.
		{"group.ErrRebalanceInProgress", group.ErrRebalanceInProgress, log.ErrRebalanceInProgress},
		{"group.ErrUnknownMember", group.ErrUnknownMember, log.ErrUnknownMember},
		{"group.ErrIllegalGeneration", group.ErrIllegalGeneration, log.ErrIllegalGeneration},
		{"group.ErrInconsistentGroupProtocol", group.ErrInconsistentGroupProtocol, log.ErrInconsistentGroupProtocol},
		{"group.ErrMemberIDRequired", group.ErrMemberIDRequired, log.ErrMemberIDRequired},
		{"group.ErrFencedInstanceID", group.ErrFencedInstanceID, log.ErrFencedInstanceID},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("some context: %w", c.err)
		if !errors.Is(wrapped, c.is) {
			t.Errorf("%s (%q) does not match log's %q", c.name, c.err, c.is)
		}
		if !errors.Is(wrapped, c.err) {
			t.Errorf("%s no longer matches itself", c.name)
		}
	}
	// A layer's sentinel matches only log's of its own condition.
	if errors.Is(controller.ErrUnknownTopic, log.ErrTopicExists) || errors.Is(segment.ErrClosed, log.ErrInvalidConfig) ||
		errors.Is(log.ErrClosed, segment.ErrClosed) || errors.Is(controller.ErrUnknownPartition, controller.ErrUnknownTopic) {
		t.Error("a sentinel matches another condition")
	}
}

// TestErrorVocabularyReturned: errors the layers return, not only their
// sentinels, match log's.
func TestErrorVocabularyReturned(t *testing.T) {
	if _, err := timingwheel.Start(timingwheel.Config{Tick: -time.Second}); !errors.Is(err, log.ErrInvalidConfig) {
		t.Errorf("timingwheel.Start with a negative tick: %v, want a log.ErrInvalidConfig", err)
	}
	if _, err := kafka.Listen("127.0.0.1:0", nil, kafka.Config{MaxConnections: -1}); !errors.Is(err, log.ErrInvalidConfig) {
		t.Errorf("kafka.Listen with a negative MaxConnections: %v, want a log.ErrInvalidConfig", err)
	}
	gc, err := group.New(group.Config{Partitions: func(string) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.Close(); err != nil {
		t.Fatal(err)
	}
	err = gc.Heartbeat(context.Background(), "g", "m", 1)
	if !errors.Is(err, log.ErrClosed) || !errors.Is(err, group.ErrClosed) {
		t.Errorf("Heartbeat on a closed coordinator: %v, want group.ErrClosed and log.ErrClosed", err)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// openBroker opens the target's data dir with log.Open. create says the
// command may create a data dir that does not exist (topics create);
// others refuse a missing one rather than leave an empty data dir behind.
// The library's warnings (a recovered tail, say) go to stderr.
func openBroker(e *env, t *target, create bool) (*log.Broker, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.bootstrap != "" {
		return nil, usagef("this needs --data-dir: it works on the files of a data dir")
	}
	if !create {
		st, err := os.Stat(t.dataDir)
		if err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("data dir %s is not a directory", t.dataDir)
		}
		// log.Open would make any directory a data dir; only create does.
		_, err1 := os.Stat(filepath.Join(t.dataDir, topicsFile))
		_, err2 := os.Stat(filepath.Join(t.dataDir, log.LockFile))
		if err1 != nil && err2 != nil {
			return nil, fmt.Errorf("%s is not a Strata data dir (no %s): create a topic in it with 'strata topics --data-dir %s create --topic T'", t.dataDir, topicsFile, t.dataDir)
		}
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := log.Open(t.dataDir, log.Config{Logger: logger})
	if errors.Is(err, log.ErrDirInUse) {
		return nil, fmt.Errorf("data dir %s is in use by a running broker: stop it first, or talk to the broker with --bootstrap-server (%w)", t.dataDir, err)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// closeBroker closes b and keeps the first error.
func closeBroker(b *log.Broker, err *error) {
	if cerr := b.Close(); *err == nil && cerr != nil {
		*err = fmt.Errorf("close data dir: %w", cerr)
	}
}

// client is a command's way to its topics: a data dir opened directly
// (broker set), or a Kafka-protocol cluster through kafka.Dial (kafka set).
type client struct {
	log.Client
	broker *log.Broker
	kafka  *kafka.Client
}

// dialTimeout bounds connecting to --bootstrap-server.
const dialTimeout = 30 * time.Second

// openClient opens the target's data dir, or dials its bootstrap servers
// (a comma-separated list, as Kafka's tools take).
func openClient(e *env, t *target) (*client, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.bootstrap == "" {
		b, err := openBroker(e, t, false)
		if err != nil {
			return nil, err
		}
		return &client{Client: b, broker: b}, nil
	}
	kc, err := dialKafka(t)
	if err != nil {
		return nil, err
	}
	return &client{Client: kc, kafka: kc}, nil
}

// dialKafka connects to the target's bootstrap servers with its TLS and
// SASL settings.
func dialKafka(t *target) (*kafka.Client, error) {
	cfg, err := t.sec.dialConfig(t.seeds())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	kc, err := kafka.Dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to --bootstrap-server %s: %w", t.bootstrap, err)
	}
	return kc, nil
}

// close closes the data dir or the connections, keeping the first error.
func (c *client) close(err *error) {
	if c.broker != nil {
		closeBroker(c.broker, err)
		return
	}
	if cerr := c.kafka.Close(); *err == nil && cerr != nil {
		*err = fmt.Errorf("close connections: %w", cerr)
	}
}

// topicMetadataWait bounds how long a command connected to a cluster waits
// for a topic it is not told of yet: one created through another member a
// moment ago reaches the member asked a little later (Kafka's tools wait
// max.block.ms, 60 s; a topic that is not coming should not hold a command
// that long).
const topicMetadataWait = 10 * time.Second

// topicPartitions returns the number of partitions of topic, saying so
// clearly when it does not exist. Over a Kafka connection it asks again,
// with Kafka's backoff (100 ms doubling to 1 s), for up to
// topicMetadataWait before it says so.
func (c *client) topicPartitions(topic string) (int, error) {
	n, err := c.Partitions(context.Background(), topic)
	if c.kafka != nil {
		deadline := time.Now().Add(topicMetadataWait)
		for backoff := 100 * time.Millisecond; errors.Is(err, log.ErrUnknownTopic) && time.Now().Add(backoff).Before(deadline); backoff = min(2*backoff, time.Second) {
			time.Sleep(backoff) // a backoff between asks: nothing tells a client that a topic appeared
			n, err = c.Partitions(context.Background(), topic)
		}
	}
	if errors.Is(err, log.ErrUnknownTopic) {
		return 0, fmt.Errorf("topic %s does not exist: %w", topic, err)
	}
	return n, err
}

// endOffsets returns the end offset of each of the n partitions of topic.
func endOffsets(c log.Client, topic string, n int) (map[int]int64, error) {
	ends := make(map[int]int64, n)
	for i := range n {
		end, err := c.ListOffset(context.Background(), log.TopicPartition{Topic: topic, Partition: i}, log.LatestOffset)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", i, err)
		}
		ends[i] = end
	}
	return ends, nil
}

// Package orders is a small application that publishes order events to a
// Strata (or Kafka-like) log, and its test (orders_test.go) shows how to
// test such code against a real broker started by the log/logtest fixture:
// in memory, up in about a millisecond, gone at the end of the test.
package orders

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/strata-log/strata/log"
)

// Order is what the service publishes.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Total    int    `json:"total"`
}

// Service publishes orders to the "orders" topic, keyed by customer so that
// one customer's orders stay in order on one partition.
type Service struct {
	producer *log.Producer
}

// NewService publishes through any log.Client: a standalone *log.Broker, a
// cluster member, or a test fixture.
func NewService(c log.Client) (*Service, error) {
	p, err := log.NewProducer(c, log.ProducerConfig{})
	if err != nil {
		return nil, err
	}
	return &Service{producer: p}, nil
}

// Place publishes an order and returns where it landed.
func (s *Service) Place(ctx context.Context, o Order) (partition int, offset int64, err error) {
	v, err := json.Marshal(o)
	if err != nil {
		return 0, 0, err
	}
	r, err := s.producer.Send(ctx, log.Record{Topic: "orders", Key: []byte(o.Customer), Value: v})
	if err != nil {
		return 0, 0, fmt.Errorf("place order %s: %w", o.ID, err)
	}
	return r.Partition, r.Offset, nil
}

// Close flushes and stops the service.
func (s *Service) Close() error { return s.producer.Close() }

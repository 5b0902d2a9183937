package txn_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// records is a Store in memory (a real one appends to __transaction_state).
type records struct {
	mu sync.Mutex
	n  int
}

func (r *records) Write(ctx context.Context, key, value []byte, _ []tp.TopicPartition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return nil
}

// leaders is a MarkerWriter that reports each marker on a channel (a real
// one sends WriteTxnMarkers to each partition's leader).
type leaders chan string

func (l leaders) WriteMarker(ctx context.Context, p tp.TopicPartition, m batch.Marker) error {
	l <- fmt.Sprintf("%v marker in %v for producer %d epoch %d", m.Type(), p, m.ProducerID, m.ProducerEpoch)
	return nil
}

func Example() {
	markers := make(leaders, 2)
	nextID := int64(4000)
	c, err := txn.New(txn.Config{
		Store:       &records{},
		Markers:     markers,
		ProducerIDs: func() (int64, error) { nextID++; return nextID - 1, nil },
	}, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	p, err := c.InitProducerID(ctx, "orders-etl", time.Minute, nil)
	fmt.Println("producer", p.ID, "epoch", p.Epoch, err)
	err = c.AddPartitions(ctx, "orders-etl", p.ID, p.Epoch, []tp.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}}, 0)
	fmt.Println("added", err)
	_, err = c.EndTxn(ctx, "orders-etl", p.ID, p.Epoch, true, 0)
	fmt.Println("committed", err)
	fmt.Println(<-markers)
	fmt.Println(<-markers)
	// Output:
	// producer 4000 epoch 0 <nil>
	// added <nil>
	// committed <nil>
	// COMMIT marker in orders-0 for producer 4000 epoch 0
	// COMMIT marker in orders-1 for producer 4000 epoch 0
}

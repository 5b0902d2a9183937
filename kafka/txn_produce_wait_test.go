package kafka

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// nopStore keeps nothing: the coordinator's records are not read back.
type nopStore struct{}

func (nopStore) Write(context.Context, []byte, []byte, []tp.TopicPartition) error { return nil }

// gateMarkers holds every marker write until open is closed.
type gateMarkers struct{ open chan struct{} }

func (g gateMarkers) WriteMarker(ctx context.Context, _ tp.TopicPartition, _ batch.Marker) error {
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A produce v12 for the next transaction, sent as soon as the EndTxn of
// the last is answered with the new epoch, waits for that transaction's
// markers (up to txnAddWait) rather than being answered a retriable
// error the client retries after its backoff; a write that outlasts the
// wait still answers ErrConcurrentTransactions.
func TestProduceV12WaitsForTheLastTransaction(t *testing.T) {
	for _, released := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			gate := gateMarkers{open: make(chan struct{})}
			var mu sync.Mutex
			next := int64(1)
			coord, err := txn.New(txn.Config{Store: nopStore{}, Markers: gate,
				ProducerIDs: func() (int64, error) { mu.Lock(); defer mu.Unlock(); next++; return next - 1, nil }},
				func(func(key, value []byte) error) error { return nil })
			require.NoError(t, err)
			defer coord.Close()
			p := []tp.TopicPartition{{Topic: "t", Partition: 0}}
			pe, err := coord.InitProducerID(ctx, "id", time.Minute, nil)
			require.NoError(t, err)
			require.NoError(t, addProducedPartitions(ctx, coord, "id", pe.ID, pe.Epoch, p))
			nextPE, err := coord.EndTxn(ctx, "id", pe.ID, pe.Epoch, true, txn.TV2)
			require.NoError(t, err)
			require.Equal(t, pe.Epoch+1, nextPE.Epoch)

			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- addProducedPartitions(ctx, coord, "id", nextPE.ID, nextPE.Epoch, p) }()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("answered while the markers are held: %v", err)
			default:
			}
			if released {
				close(gate.open)
				require.NoError(t, <-done)
				require.Less(t, time.Since(start), txnAddWait, "answered once the markers are written")
				m, _ := coord.Describe("id")
				require.Equal(t, txn.Ongoing, m.State)
				require.Equal(t, nextPE.Epoch, m.ProducerEpoch)
				return
			}
			require.ErrorIs(t, <-done, txn.ErrConcurrentTransactions)
			require.Equal(t, txnAddWait, time.Since(start))
			close(gate.open) // let Close finish the completion
		})
	}
}

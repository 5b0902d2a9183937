package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/log"
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

// busyRouter is a TxnRouter whose coordinator answers
// ErrConcurrentTransactions to the first busy adds.
type busyRouter struct {
	TxnRouter
	mu    sync.Mutex
	busy  int
	asked int
}

func (r *busyRouter) VerifyTxnPartition(context.Context, string, log.ProducerID, tp.TopicPartition, bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	if r.asked <= r.busy {
		return fmt.Errorf("remote: %w", txn.ErrConcurrentTransactions)
	}
	return nil
}

// On a cluster member the transaction's coordinator may be another
// node's: a transaction version 2 add it answers ErrConcurrentTransactions
// is asked again after a backoff, until it is done or txnAddWait after the
// first ask (then the last answer).
func TestAddRoutedRetriesBusy(t *testing.T) {
	for _, c := range []struct {
		busy    int
		wantErr bool
	}{{0, false}, {3, false}, {1000, true}} {
		synctest.Test(t, func(t *testing.T) {
			r := &busyRouter{busy: c.busy}
			start := time.Now()
			err := addRouted(context.Background(), r, "id", log.ProducerID{ID: 1}, tp.TopicPartition{Topic: "t"})
			if !c.wantErr {
				require.NoError(t, err)
				require.Equal(t, c.busy+1, r.asked)
				require.Less(t, time.Since(start), txnAddWait)
				return
			}
			require.ErrorIs(t, err, txn.ErrConcurrentTransactions)
			require.Equal(t, txnAddWait, time.Since(start))
			require.Less(t, r.asked, 20, "backed off")
		})
	}
}

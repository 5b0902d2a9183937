package timingwheel_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/timingwheel"
)

func ExampleTimingWheel_AfterFunc() {
	tw := timingwheel.New(time.Millisecond, 20)
	defer tw.Stop()

	fired := make(chan string, 1)
	tw.AfterFunc(5*time.Millisecond, func() { fired <- "fired" })
	cancelled := tw.AfterFunc(time.Hour, func() { fired <- "never" })

	fmt.Println(<-fired)
	fmt.Println("stopped before firing:", cancelled.Stop())
	// Output:
	// fired
	// stopped before firing: true
}

// partition is a toy log: what a parked fetch waits on.
type partition struct {
	mu   sync.Mutex
	recs []string
}

func (p *partition) append(r string) {
	p.mu.Lock()
	p.recs = append(p.recs, r)
	p.mu.Unlock()
}

func (p *partition) read(from int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.recs[min(from, len(p.recs)):]...)
}

// fetch is a long poll: it completes when the partition has records past
// offset, or with what there is (nothing) at its timeout.
type fetch struct {
	p      *partition
	offset int
	done   chan []string // buffered: OnComplete never blocks
}

func (f *fetch) TryComplete() bool { return len(f.p.read(f.offset)) > 0 }
func (f *fetch) OnComplete()       { f.done <- f.p.read(f.offset) }
func (f *fetch) OnExpiration()     {}

// A consumer's fetch finds no data and parks in the purgatory under its
// topic-partition; the next append completes it.
func ExamplePurgatory() {
	tw := timingwheel.New(time.Millisecond, 20)
	defer tw.Stop()
	purgatory, err := timingwheel.NewPurgatory[string](tw, timingwheel.PurgatoryConfig{})
	if err != nil {
		panic(err)
	}
	orders := &partition{}

	f := &fetch{p: orders, offset: 0, done: make(chan []string, 1)}
	_, completed := purgatory.TryCompleteElseWatch(f, 30*time.Second, "orders-0")
	fmt.Println("completed at once:", completed)

	// The append path: publish the new records, then wake the waiters.
	orders.append("order #1")
	fmt.Println("completed by the append:", purgatory.CheckAndComplete("orders-0"))
	fmt.Println("fetched:", <-f.done)
	// Output:
	// completed at once: false
	// completed by the append: 1
	// fetched: [order #1]
}

// A consumer whose context is cancelled ends its parked fetch at once.
func ExampleDelayed_Cancel() {
	tw := timingwheel.New(time.Millisecond, 20)
	defer tw.Stop()
	purgatory, _ := timingwheel.NewPurgatory[string](tw, timingwheel.PurgatoryConfig{})
	f := &fetch{p: &partition{}, done: make(chan []string, 1)}

	ctx, cancel := context.WithCancel(context.Background())
	d, _ := purgatory.TryCompleteElseWatch(f, 30*time.Second, "orders-0")
	cancel() // the consumer went away

	select {
	case recs := <-f.done:
		fmt.Println("fetched:", recs)
	case <-ctx.Done():
		if d.Cancel() {
			fmt.Println("fetch cancelled:", ctx.Err())
		} else {
			fmt.Println("fetched first:", <-f.done)
		}
	}
	fmt.Println("pending:", purgatory.Pending())
	// Output:
	// fetch cancelled: context canceled
	// pending: 0
}

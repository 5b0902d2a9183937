// Package clock is Strata's one time seam: the [Clock] interface every
// package that waits or measures time on the server side takes in its
// Config, and [System], the clock of the operating system that a nil Config
// field stands for.
//
// The methods mirror package time: Now, NewTimer and AfterFunc. Tests pass a
// fake whose time moves only when they say so (package clocktest), or run
// under testing/synctest with the system clock, whose time is then virtual.
//
//	cfg := timingwheel.Config{Clock: clocktest.New(start)} // a fake in tests
//	cfg := timingwheel.Config{}                             // the system clock
//
// # The rule for time
//
// A package takes a Clock when its deadlines are the server's and a test
// must drive them while real IO goes on: storage (log.Config and
// log.StoreConfig: retention, flush intervals, the timestamps a broker
// sets), the group coordinator (group.Config: session and rebalance
// timeouts), the controller (controller.Config: broker sessions, the
// leader-imbalance check), a replicated member (replica.Config: ISR lag,
// ticks, the produce order of idempotent batches) and the timing wheel that
// holds delayed requests (timingwheel.Config). Their tests advance a
// clocktest clock, or a controllertest one.
//
// The client side takes no Clock: the Producer (linger, Timeout, retry
// backoff), the Consumer (poll waits, heartbeats, session timeouts as a
// member), replica's routing of a request to the leader (retry backoff) and
// kafka.Client read package time directly, as their callers' deadlines do.
// Their timing is tested under testing/synctest, where the system clock is
// virtual and a goroutine's wait ends when the test has nothing else to run:
// log's producer_test.go (TestProducerLinger), producer_idempotent_test.go
// and consumer_test.go (TestConsumerMaxWait, TestConsumerGroupSessionTimeout),
// and replica's order_internal_test.go. A test that crosses a real socket
// cannot run under synctest (a read from the network is not a durable wait);
// such tests await events with generous bounds and never assert a short
// wall-clock duration.
//
// # The file system
//
// The same split holds for files. log takes a vfs.FS (log.Config.FS,
// log.StoreConfig.FS), so its tests run on vfs.NewMem and crash it or
// inject errors. replica.Config has no FS today: a member opens its data
// dir on the operating system's file system (its store is a log.Store with
// the default FS, and it checks for partition directories with os.Stat),
// and replica's tests use temporary directories (t.TempDir).
package clock

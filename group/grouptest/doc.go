// Package grouptest holds test doubles for package group: Clock, a fake
// clock that moves only when told to, and Store, an in-memory OffsetStore
// that keeps commits as __consumer_offsets records and can be made to fail,
// and Log, an in-memory partition of __consumer_offsets for group.Open
// (a broker's restart is a second Open over the same Log).
//
// A coordinator under a fake clock, with a store that survives a "restart":
//
//	clock := grouptest.NewClock(time.Unix(0, 0))
//	store := grouptest.NewStore(clock)
//	c, _ := group.New(group.Config{Store: store, Clock: clock, Partitions: ...})
//	... Join, Commit ...
//	clock.Advance(45 * time.Second) // a silent member's session times out
//	c.Close()
//	initial, _ := store.Initial()    // what a broker reads back at open
//	c, _ = group.New(group.Config{Initial: initial, ...})
package grouptest

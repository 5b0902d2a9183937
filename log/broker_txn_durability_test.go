package log

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
	"github.com/strata-log/strata/vfs"
)

// The durability rule of TransactionStateTopic (txnStateConfig): its
// records are as durable as the records of the transactions they decide.
// Two transactions over two partitions, committed one after the other,
// with a crash before every filesystem change in turn: reopened, with the
// open transaction timed out and every decision's markers written, a
// READ_COMMITTED reader sees each transaction whole or not at all, every
// acknowledged commit whole, and no partition keeps a transaction open.

// syncedFS is a file system whose every change is durable at once, so that
// a crash of the MemFS under it keeps everything written, in order: a
// process crash, where the page cache survives.
type syncedFS struct{ vfs.FS }

type syncedFile struct{ vfs.File }

func (f syncedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err == nil {
		err = f.File.Sync()
	}
	return n, err
}

func (f syncedFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if err == nil {
		err = f.File.Sync()
	}
	return n, err
}

func (f syncedFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	return f.File.Sync()
}

func (s syncedFS) file(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return syncedFile{f}, s.FS.SyncDir(filepath.Dir(name))
}

func (s syncedFS) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	return s.file(f, err, name)
}

func (s syncedFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := s.FS.OpenReadWrite(name)
	return s.file(f, err, name)
}

func (s syncedFS) Remove(name string) error {
	if err := s.FS.Remove(name); err != nil {
		return err
	}
	return s.FS.SyncDir(filepath.Dir(name))
}

func (s syncedFS) RemoveAll(name string) error {
	if err := s.FS.RemoveAll(name); err != nil {
		return err
	}
	return s.FS.SyncDir(filepath.Dir(name))
}

func (s syncedFS) Rename(oldname, newname string) error {
	if err := s.FS.Rename(oldname, newname); err != nil {
		return err
	}
	if err := s.FS.SyncDir(filepath.Dir(oldname)); err != nil {
		return err
	}
	return s.FS.SyncDir(filepath.Dir(newname))
}

func (s syncedFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := s.FS.MkdirAll(dir, perm); err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if err := s.FS.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

func (s syncedFS) Lock(name string) (io.Closer, error) { return s.FS.Lock(name) }

// txnDurabilityRun runs the two transactions on fs: it returns how many
// commits were acknowledged when the crash image was taken (set by
// crashed). The coordinator writes the records; the partitions get
// transactional batches of 5 records each.
func txnDurabilityRun(t *testing.T, fs vfs.FS, defaults, topic TopicConfig, acked *atomic.Int64) {
	t.Helper()
	b, err := Open("/d", Config{FS: fs, DefaultTopic: defaults})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	topic.Partitions = 2
	_, err = b.CreateTopic("t", topic)
	require.NoError(t, err)
	ctx := context.Background()
	c := txnCoordinator(t, b)
	pid, err := c.InitProducerID(ctx, "etl", time.Minute, nil)
	require.NoError(t, err)
	ps := []tp.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	for k := range 2 {
		require.NoError(t, c.AddPartitions(ctx, "etl", pid.ID, pid.Epoch, ps, 0))
		for i := range 2 {
			p, _ := b.Partition("t", i)
			_, _, err := p.AppendBatch(txnProduce(pid.ID, pid.Epoch, int32(5*k), 5))
			require.NoError(t, err)
		}
		_, err = c.EndTxn(ctx, "etl", pid.ID, pid.Epoch, true, 0)
		require.NoError(t, err)
		acked.Add(1)
		<-c.Idle("etl") // the markers and CompleteCommit written
	}
}

// committedTxns returns, for each partition of "t", which of the two
// transactions a READ_COMMITTED reader sees (by their records' sequences)
// once the reopened broker has settled: the open transaction timed out,
// every decision's markers written.
func committedTxns(t *testing.T, image vfs.FS, msg string) [2][2]int {
	t.Helper()
	clk := clocktest.New(time.Now())
	b, err := Open("/d", Config{FS: image, Clock: clk})
	require.NoError(t, err, msg)
	defer func() { require.NoError(t, b.Close(), msg) }()
	c := txnCoordinator(t, b)
	clk.Advance(2 * time.Minute) // past the transaction timeout
	<-c.Idle("etl")
	if m, ok := c.Describe("etl"); ok {
		require.NotEqual(t, txn.Ongoing, m.State, msg)
	}
	var seen [2][2]int
	for i := range 2 {
		p, err := b.Partition("t", i)
		if err != nil {
			require.ErrorIs(t, err, ErrUnknownTopic, msg)
			continue
		}
		require.Equal(t, p.EndOffset(), p.LastStableOffset(), "%s: %s keeps a transaction open", msg, p)
		for r, err := range p.RecordsIsolated(0, ReadCommitted) {
			require.NoError(t, err, msg)
			var pid, epoch, seq int
			_, err := fmt.Sscanf(string(r.Value), "p%d-e%d-s%d", &pid, &epoch, &seq)
			require.NoError(t, err, msg)
			seen[i][seq/5]++
		}
	}
	return seen
}

// TestTxnCommitWholeAtEveryCrash: under each flush policy that keeps
// acknowledged records (process crash with the page cache; power loss with
// the broker's FlushMessages 1; power loss with the default page cache but
// the transaction's topic fsyncing its appends, which makes the
// coordinator fsync the records naming it and the markers), a crash before each filesystem
// change never leaves a transaction visible in one partition and not the
// other, nor an acknowledged commit invisible, nor a transaction open.
func TestTxnCommitWholeAtEveryCrash(t *testing.T) {
	s := seed(t)
	cases := []struct {
		name            string
		process         bool // the crash keeps every write (syncedFS)
		defaults, topic TopicConfig
	}{
		{name: "process crash, page cache", process: true},
		{name: "power loss, broker FlushMessages 1", defaults: TopicConfig{FlushMessages: 1}},
		{name: "power loss, topic FlushMessages 1", topic: TopicConfig{FlushMessages: 1}},
		{name: "power loss, topic FlushMessages 2", topic: TopicConfig{FlushMessages: 2, FlushInterval: time.Hour}},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := func(mem *vfs.MemFS) vfs.FS {
				if tc.process {
					return syncedFS{mem}
				}
				return mem
			}
			counter := &crashAt{mem: vfs.NewMem()}
			var acked atomic.Int64
			txnDurabilityRun(t, vfs.WithErrors(base(counter.mem), counter.inject), tc.defaults, tc.topic, &acked)
			total := counter.n
			require.Equal(t, [2][2]int{{5, 5}, {5, 5}}, committedTxns(t, counter.mem, "no crash"))
			// Under the race detector (10x slower) a quarter of the crash
			// points, which ones by the seed: every point over runs.
			step, first := 1, 1
			if raceEnabled {
				step, first = 4, 1+int(s%4)
			}
			crashes := 0
			for at := first; at <= total; at += step {
				msg := fmt.Sprintf("%s: crash before change %d of %d", tc.name, at, total)
				var acked atomic.Int64
				ca := &crashAtDurable{crashAt: crashAt{mem: vfs.NewMem(), at: at}, durable: &acked,
					torn: !tc.process && at%2 == 0, rng: rand.New(rand.NewPCG(s, uint64(ci*100000+at)))}
				txnDurabilityRun(t, vfs.WithErrors(base(ca.mem), ca.inject), tc.defaults, tc.topic, &acked)
				if ca.image == nil {
					require.Less(t, ca.n, at, msg)
					continue
				}
				crashes++
				seen := committedTxns(t, ca.image, msg)
				for k := range 2 {
					require.Equal(t, seen[0][k], seen[1][k], "%s: transaction %d is in one partition only: %v", msg, k, seen)
					require.Contains(t, []int{0, 5}, seen[0][k], "%s: %v", msg, seen)
					if int64(k) < ca.durableAt {
						require.Equal(t, 5, seen[0][k], "%s: commit %d was acknowledged: %v", msg, k, seen)
					}
				}
			}
			t.Logf("%d crashes of %d changes", crashes, total)
		})
	}
}

package log

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// small is a topic config that rolls often and indexes every batch or so.
var small = TopicConfig{SegmentBytes: 2048, IndexIntervalBytes: 256, MaxIndexBytes: 1024}

func createT(t *testing.T, b *Broker, name string, cfg TopicConfig) *Partition {
	t.Helper()
	tp, err := b.CreateTopic(name, cfg)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return p
}

func TestRollsAndReadsAcrossSegments(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		p := createT(t, b, "t", small)
		base := time.UnixMilli(1_000_000)
		const n = 500
		for i := 0; i < n; i += 5 {
			var rs []Record
			for j := i; j < i+5; j++ {
				r := rec(j)
				r.Timestamp = base.Add(time.Duration(j) * time.Second)
				rs = append(rs, r)
			}
			off, err := p.Append(rs...)
			require.NoError(t, err)
			require.EqualValues(t, i, off)
		}
		require.Greater(t, p.Segments(), 5, "small segments roll")
		verify := func(p *Partition) {
			// Every offset reads back as itself, through index lookups.
			for i := 0; i < n; i++ {
				recs, err := p.Read(int64(i), 1)
				require.NoError(t, err)
				require.NotEmpty(t, recs)
				require.EqualValues(t, i, recs[0].Offset)
				require.Equal(t, fmt.Sprintf("value-%d", i), string(recs[0].Value))
			}
			// A big read spans segments and returns all, in order.
			recs, err := p.Read(0, 1<<20)
			require.NoError(t, err)
			require.Len(t, recs, n)
			for i, r := range recs {
				require.EqualValues(t, i, r.Offset)
			}
			// OffsetForTime: first offset with timestamp >= ts.
			for _, c := range []struct {
				ts   time.Time
				want int64
			}{
				{base.Add(-time.Hour), 0},
				{base, 0},
				{base.Add(1500 * time.Millisecond), 2},
				{base.Add(250 * time.Second), 250},
				{base.Add(499 * time.Second), 499},
				{base.Add(500 * time.Second), n}, // none: the end offset
			} {
				got, err := p.OffsetForTime(c.ts)
				require.NoError(t, err)
				require.Equal(t, c.want, got, "ts %v", c.ts.Sub(base))
			}
		}
		verify(p)
		require.NoError(t, b.Close())

		// Sealed segments' indexes were trimmed to their entries.
		names, err := fs.ReadDir(filepath.Join(dir, "t-0"))
		require.NoError(t, err)
		require.Contains(t, names, segment.Name(0, ".index"))

		b = openT(t, fs, dir)
		defer b.Close()
		tp, _ := b.Topic("t")
		p, _ = tp.Partition(0)
		require.EqualValues(t, n, p.EndOffset())
		verify(p)
	})
}

func TestSegmentTimeRoll(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{SegmentTime: time.Hour})
	t0 := time.UnixMilli(10_000_000_000)
	for i, d := range []time.Duration{0, 30 * time.Minute, 61 * time.Minute, 62 * time.Minute, 3 * time.Hour} {
		r := rec(i)
		r.Timestamp = t0.Add(d)
		_, err := p.Append(r)
		require.NoError(t, err)
	}
	// Rolls when a batch is more than SegmentTime newer than the segment's
	// first: before 61m and before 3h.
	require.Equal(t, 3, p.Segments())
}

func TestRetention(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		defer b.Close()
		now := time.Now()
		cfg := small
		cfg.RetentionTime = time.Hour
		p := createT(t, b, "bytime", cfg)
		for i := 0; i < 200; i++ {
			r := rec(i)
			r.Timestamp = now.Add(-3 * time.Hour).Add(time.Duration(i) * time.Minute)
			_, err := p.Append(r)
			require.NoError(t, err)
		}
		segs := p.Segments()
		require.Greater(t, segs, 3)
		n, err := p.enforceRetention(now)
		require.NoError(t, err)
		require.Greater(t, n, 0)
		require.Equal(t, segs-n, p.Segments())
		start := p.StartOffset()
		// Every record before start was older than the retention; the first
		// kept segment has at least one record within it.
		require.Greater(t, start, int64(0))
		require.Less(t, start, int64(200-60+1))
		_, err = p.Read(start-1, 100)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		recs, err := p.Read(start, 100)
		require.NoError(t, err)
		require.Equal(t, start, recs[0].Offset)
		// The active segment is never deleted, however old.
		n, err = p.enforceRetention(now.Add(1000 * time.Hour))
		require.NoError(t, err)
		require.Greater(t, n, 0)
		require.Equal(t, 1, p.Segments())
		require.EqualValues(t, 200, p.EndOffset())

		cfg = small
		cfg.RetentionBytes = 4000
		q := createT(t, b, "bysize", cfg)
		for i := 0; i < 300; i++ {
			_, err := q.Append(rec(i))
			require.NoError(t, err)
		}
		before := q.Size()
		_, err = q.enforceRetention(time.Now())
		require.NoError(t, err)
		// Kafka's rule: delete the oldest while what is left stays >= the limit.
		require.GreaterOrEqual(t, q.Size(), cfg.RetentionBytes)
		require.Less(t, q.Size(), before)
		segs2 := *q.segs.Load()
		require.Less(t, q.Size()-segs2[0].Size(), cfg.RetentionBytes)
		require.Equal(t, segs2[0].BaseOffset(), q.StartOffset())

		// Forever: nothing deleted.
		cfg = small
		cfg.RetentionTime = -1
		f := createT(t, b, "forever", cfg)
		for i := 0; i < 100; i++ {
			r := rec(i)
			r.Timestamp = time.UnixMilli(1)
			_, err := f.Append(r)
			require.NoError(t, err)
		}
		n, err = f.enforceRetention(now)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// TestRetentionInBackground checks that the broker runs retention every
// RetentionCheckInterval and that the new log start offset survives a reopen.
func TestRetentionInBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := vfs.NewMem()
		b, err := Open("/d", Config{FS: fs, RetentionCheckInterval: time.Minute})
		require.NoError(t, err)
		cfg := small
		cfg.RetentionTime = time.Hour
		p := createT(t, b, "t", cfg)
		for i := 0; i < 100; i++ {
			_, err := p.Append(rec(i)) // timestamps: now (synctest's clock)
			require.NoError(t, err)
		}
		require.Greater(t, p.Segments(), 2)
		time.Sleep(59 * time.Minute) // virtual time: nothing is due yet
		synctest.Wait()
		require.EqualValues(t, 0, p.StartOffset())
		time.Sleep(2*time.Minute + time.Second) // past the hour, and a check ran
		synctest.Wait()
		require.Equal(t, 1, p.Segments())
		start := p.StartOffset()
		require.Greater(t, start, int64(0))
		require.NoError(t, b.Close())

		b, err = Open("/d", Config{FS: fs})
		require.NoError(t, err)
		defer b.Close()
		tp, _ := b.Topic("t")
		p, _ = tp.Partition(0)
		require.Equal(t, start, p.StartOffset())
		require.EqualValues(t, 100, p.EndOffset())
	})
}

func TestConcurrentAppendersAndReaders(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		defer b.Close()
		cfg := small
		cfg.FlushMessages = 7
		p := createT(t, b, "t", cfg)
		const writers, each = 4, 200
		var wg sync.WaitGroup
		done := make(chan struct{})
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					_, err := p.Append(Record{Key: []byte{byte(w)}, Value: []byte(fmt.Sprint(i))}, Record{Key: []byte{byte(w)}, Value: []byte(fmt.Sprint(i))})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		var rg sync.WaitGroup
		for r := 0; r < 3; r++ {
			rg.Add(1)
			go func() {
				defer rg.Done()
				next := int64(0)
				for {
					select {
					case <-done:
						return
					default:
					}
					recs, err := p.Read(next, 512)
					if err != nil {
						t.Error(err)
						return
					}
					for _, rc := range recs {
						if rc.Offset != next {
							t.Errorf("offset %d, want %d", rc.Offset, next)
							return
						}
						next++
					}
				}
			}()
		}
		wg.Wait()
		close(done)
		rg.Wait()
		require.EqualValues(t, writers*each*2, p.EndOffset())
		// Per writer, its records are in order; batches are never split.
		recs, err := p.Read(0, 1<<30)
		require.NoError(t, err)
		require.Len(t, recs, writers*each*2)
		seen := map[byte]int{}
		for i := 0; i < len(recs); i += 2 {
			w := recs[i].Key[0]
			require.Equal(t, recs[i].Value, recs[i+1].Value)
			require.Equal(t, fmt.Sprint(seen[w]), string(recs[i].Value))
			seen[w]++
		}
	})
}

func TestGroupCommit(t *testing.T) {
	b := openT(t, vfs.Default, t.TempDir())
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{FlushMessages: 1})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				off, err := p.Append(rec(i))
				if err != nil {
					t.Error(err)
					return
				}
				// Acknowledged means durable: the recovery point covers it.
				if rp := p.RecoveryPoint(); rp <= off {
					t.Errorf("offset %d acknowledged with recovery point %d", off, rp)
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 320, p.RecoveryPoint())
}

func TestSendTo(t *testing.T) {
	for _, kind := range []string{"tcp", "unix", "pipe", "tcp-memfs"} {
		t.Run(kind, func(t *testing.T) {
			var fs vfs.FS = vfs.Default
			dir := t.TempDir()
			if kind == "tcp-memfs" {
				fs, dir = vfs.NewMem(), "/d"
			}
			b := openT(t, fs, dir)
			defer b.Close()
			p := createT(t, b, "t", small)
			for i := 0; i < 300; i += 3 {
				_, err := p.Append(rec(i), rec(i+1), rec(i+2))
				require.NoError(t, err)
			}
			client, server := connPair(t, kind)
			var got bytes.Buffer
			readDone := make(chan error)
			go func() {
				_, err := got.ReadFrom(client)
				readDone <- err
			}()
			off := int64(0)
			sends := 0
			for off < p.EndOffset() {
				n, next, err := p.SendTo(server, off, 700)
				require.NoError(t, err)
				require.Greater(t, n, int64(0))
				require.Greater(t, next, off)
				off = next
				sends++
			}
			n, next, err := p.SendTo(server, off, 700)
			require.NoError(t, err)
			require.Zero(t, n)
			require.Equal(t, off, next)
			require.NoError(t, server.Close())
			require.NoError(t, <-readDone)
			recs, err := DecodeRecords(got.Bytes())
			require.NoError(t, err)
			require.Len(t, recs, 300)
			for i, r := range recs {
				require.EqualValues(t, i, r.Offset)
				require.Equal(t, fmt.Sprintf("value-%d", i), string(r.Value))
			}
			require.Greater(t, sends, 5)

			_, _, err = p.SendTo(server, 301, 100)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		})
	}
}

// TestSendToOneBigBatch: a batch larger than maxBytes is still sent whole.
func TestSendToOneBigBatch(t *testing.T) {
	b := openT(t, vfs.Default, t.TempDir())
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	_, err := p.Append(Record{Value: bytes.Repeat([]byte("x"), 10000)})
	require.NoError(t, err)
	client, server := connPair(t, "tcp")
	got := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		buf.ReadFrom(client)
		got <- buf.Bytes()
	}()
	n, next, err := p.SendTo(server, 0, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, next)
	require.Greater(t, n, int64(10000))
	server.Close()
	recs, err := DecodeRecords(<-got)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Len(t, recs[0].Value, 10000)
}

func connPair(t *testing.T, kind string) (client, server net.Conn) {
	t.Helper()
	if kind == "pipe" {
		c, s := net.Pipe()
		t.Cleanup(func() { c.Close(); s.Close() })
		return c, s
	}
	network, addr := "tcp", "127.0.0.1:0"
	if kind == "unix" {
		network = "unix"
		d, err := os.MkdirTemp("", "strata")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(d) })
		addr = filepath.Join(d, "s")
	}
	l, err := net.Listen(network, addr)
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = net.Dial(network, l.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

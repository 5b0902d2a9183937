package vfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
)

// pattern is the byte at offset i of the files the concurrency tests write.
func pattern(i int) byte { return byte(i % 251) }

func checkPattern(b []byte, from int) error {
	for i, c := range b {
		if c != pattern(from+i) {
			return fmt.Errorf("byte %d is %d, want %d", from+i, c, pattern(from+i))
		}
	}
	return nil
}

// TestMemConcurrentWriterReaders is the storage engine's pattern: one writer
// appends and syncs, readers ReadAt through their own handles what the
// writer has published, a tester takes crash clones at random instants, and
// other goroutines change directories meanwhile. Run it with -race.
func TestMemConcurrentWriterReaders(t *testing.T) {
	leaktest.Check(t)
	m := newMemWithDir(t)
	w, err := m.Create("/d/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	const total = 1 << 20
	var written, synced atomic.Int64
	done := make(chan struct{})
	errs := make(chan error, 16)
	var wg sync.WaitGroup

	wg.Go(func() { // the writer
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 0, 8192)
		for off := 0; off < total; {
			buf = buf[:min(1+rng.IntN(cap(buf)-1), total-off)]
			for i := range buf {
				buf[i] = pattern(off + i)
			}
			if _, err := w.Write(buf); err != nil {
				errs <- err
				return
			}
			off += len(buf)
			written.Store(int64(off))
			if rng.IntN(4) == 0 {
				if err := w.Sync(); err != nil {
					errs <- err
					return
				}
				synced.Store(int64(off))
			}
		}
	})
	for r := range 3 { // readers
		wg.Go(func() {
			f, err := m.Open("/d/log")
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			buf := make([]byte, 4096)
			for {
				select {
				case <-done:
					return
				default:
				}
				end := int(written.Load())
				if end == 0 {
					continue
				}
				off := rng.IntN(end)
				n, err := f.ReadAt(buf[:min(len(buf), end-off)], int64(off))
				if err != nil {
					errs <- fmt.Errorf("ReadAt(%d) below the written %d: %v", off, end, err)
					return
				}
				if err := checkPattern(buf[:n], off); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() { // crash clones at random instants
		for {
			select {
			case <-done:
				return
			default:
			}
			atLeast := int(synced.Load())
			c := m.CrashClone()
			b, err := ReadFile(c, "/d/log")
			if err != nil {
				errs <- err
				return
			}
			if len(b) < atLeast {
				errs <- fmt.Errorf("crash clone has %d bytes, %d were synced", len(b), atLeast)
				return
			}
			if err := checkPattern(b, 0); err != nil {
				errs <- fmt.Errorf("crash clone: %v", err)
				return
			}
		}
	})
	wg.Go(func() { // directory traffic
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			name := fmt.Sprintf("/d/tmp%d", i%5)
			if err := WriteFileAtomic(m, name, []byte(name)); err != nil {
				errs <- err
				return
			}
			if _, err := m.ReadDir("/d"); err != nil {
				errs <- err
				return
			}
			if i%3 == 0 {
				if err := m.Remove(name); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	b, err := ReadFile(m, "/d/log")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != total {
		t.Fatalf("log has %d bytes, want %d", len(b), total)
	}
	if err := checkPattern(b, 0); err != nil {
		t.Fatal(err)
	}
}

// TestMemCrashWhileWriting crashes the FS under a running writer: the writer
// soon gets ErrCrashed, and the restarted FS holds at least what was synced.
func TestMemCrashWhileWriting(t *testing.T) {
	leaktest.Check(t)
	m := newMemWithDir(t)
	w, err := m.Create("/d/log")
	if err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/d")
	var synced atomic.Int64
	started := make(chan struct{})
	var wg sync.WaitGroup
	var writerErr error
	wg.Go(func() {
		buf := make([]byte, 512)
		for off := 0; ; off += len(buf) {
			for i := range buf {
				buf[i] = pattern(off + i)
			}
			if _, err := w.Write(buf); err != nil {
				writerErr = err
				return
			}
			if err := w.Sync(); err != nil {
				writerErr = err
				return
			}
			synced.Store(int64(off + len(buf)))
			if off == 64*len(buf) {
				close(started)
			}
		}
	})
	<-started
	atLeast := synced.Load()
	m.CrashWithTornWrites(rand.New(rand.NewPCG(7, 7)))
	wg.Wait()
	if !errors.Is(writerErr, ErrCrashed) {
		t.Fatalf("writer stopped with %v, want ErrCrashed", writerErr)
	}
	b, err := ReadFile(m, "/d/log")
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < atLeast {
		t.Fatalf("%d bytes after the crash, %d were synced", len(b), atLeast)
	}
	// Every byte up to what the last successful Sync covered is intact.
	if err := checkPattern(b[:synced.Load()], 0); err != nil {
		t.Fatal(err)
	}
}

// TestMemCrashCloneIsAtomic checks that a crash clone taken while a writer
// runs is a state the writer went through: the writer syncs a counter into
// "a" and then into "b", so no crash may show b ahead of a.
func TestMemCrashCloneIsAtomic(t *testing.T) {
	leaktest.Check(t)
	m := newMemWithDir(t)
	a := writeFile(t, m, "/d/a", "00000000", true, true)
	b := writeFile(t, m, "/d/b", "00000000", true, true)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var writerErr error
	wg.Go(func() {
		defer close(done)
		for i := range 20000 {
			v := fmt.Appendf(nil, "%08d", i)
			for _, f := range []File{a, b} {
				if _, err := f.WriteAt(v, 0); err != nil {
					writerErr = err
					return
				}
				if err := f.Sync(); err != nil {
					writerErr = err
					return
				}
			}
		}
	})
	clones := 0
	for {
		select {
		case <-done:
		default:
			c := m.CrashClone()
			va, vb := contents(t, c, "/d/a"), contents(t, c, "/d/b")
			if vb > va {
				t.Fatalf("crash clone has a=%s b=%s: b was synced after a", va, vb)
			}
			clones++
			continue
		}
		break
	}
	wg.Wait()
	if writerErr != nil {
		t.Fatal(writerErr)
	}
	t.Logf("%d clones", clones)
}

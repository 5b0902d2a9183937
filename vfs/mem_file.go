package vfs

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// memPageSize is the granularity at which a MemFS file remembers the durable
// bytes that unsynced writes overwrote.
const memPageSize = 4096

// memFile is the contents of a MemFS file.
//
// The durable contents are not a second copy: they are data[:syncedLen] with
// the pages in undo laid over it. Before a write or a truncate changes a byte
// below syncedLen, the page holding it is saved in undo (once per sync). So
// Sync costs O(pages overwritten since the last sync) — O(1) for an appended
// log — and only a crash pays for building the durable bytes.
//
// Invariant: every page that starts below syncedLen is either in undo or
// unchanged since the last sync and wholly inside data.
type memFile struct {
	mu        sync.RWMutex
	data      []byte // current contents
	syncedLen int    // size at the last sync
	undo      map[int][]byte
	modTime   time.Time
}

// save keeps the durable bytes of the pages that [lo, hi) overlaps.
func (f *memFile) save(lo, hi int) {
	hi = min(hi, f.syncedLen)
	if lo >= hi {
		return
	}
	for pg := lo / memPageSize; pg*memPageSize < hi; pg++ {
		if _, ok := f.undo[pg]; ok {
			continue
		}
		if f.undo == nil {
			f.undo = map[int][]byte{}
		}
		start := pg * memPageSize
		f.undo[pg] = slices.Clone(f.data[start:min(start+memPageSize, f.syncedLen)])
	}
}

// setLen sets len(data) to n, growing the array as append would. Bytes newly
// exposed are unspecified; the caller overwrites or zeroes them.
func (f *memFile) setLen(n int) {
	if n > cap(f.data) {
		f.data = slices.Grow(f.data, n-len(f.data))
	}
	f.data = f.data[:n]
}

func (f *memFile) writeAt(p []byte, off int) {
	end := off + len(p)
	f.save(off, end)
	if old := len(f.data); end > old {
		f.setLen(end)
		if off > old {
			clear(f.data[old:off])
		}
	}
	copy(f.data[off:], p)
	f.modTime = time.Now()
}

func (f *memFile) truncate(size int) {
	old := len(f.data)
	switch {
	case size < old:
		f.save(size, old)
		if size == 0 {
			f.data = nil
		} else {
			f.data = f.data[:size]
		}
	case size > old:
		f.setLen(size)
		clear(f.data[old:])
	}
	f.modTime = time.Now()
}

func (f *memFile) sync() {
	f.syncedLen = len(f.data)
	f.undo = nil
}

// durableBytes returns a copy of the durable contents, plus with rng a torn
// part of the unsynced appended tail (see MemFS.CrashWithTornWrites).
func (f *memFile) durableBytes(rng *rand.Rand) []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]byte, f.syncedLen)
	copy(out, f.data)
	for pg, b := range f.undo {
		copy(out[pg*memPageSize:], b)
	}
	if rng != nil && len(f.data) > f.syncedLen {
		out = append(out, tornTail(rng, f.data[f.syncedLen:])...)
	}
	return out
}

// tornTail returns what a crash may leave of tail, bytes written but not
// synced: a random prefix, in which a random run may be zeros or garbage.
func tornTail(rng *rand.Rand, tail []byte) []byte {
	k := rng.IntN(len(tail) + 1)
	kept := slices.Clone(tail[:k])
	if k > 0 && rng.IntN(2) == 0 {
		a := rng.IntN(k)
		b := a + 1 + rng.IntN(k-a)
		if rng.IntN(2) == 0 {
			clear(kept[a:b])
		} else {
			for i := a; i < b; i++ {
				kept[i] = byte(rng.Uint32())
			}
		}
	}
	return kept
}

// memHandle is an open MemFS file (or directory).
type memHandle struct {
	fs     *MemFS
	gen    *memGen
	node   *memNode
	name   string // as opened, for errors and Stat
	write  bool
	closed atomic.Bool

	mu  sync.Mutex // guards off: Read and Write use it, ReadAt and WriteAt do not
	off int64
}

// newHandle opens n; m.mu must be held.
func (m *MemFS) newHandle(n *memNode, name string, write bool) *memHandle {
	return &memHandle{fs: m, gen: m.gen, node: n, name: name, write: write}
}

// check returns the error for op on h, if any.
func (h *memHandle) check(op string, write bool) error {
	var err error
	switch {
	case h.closed.Load():
		err = os.ErrClosed
	case h.gen.crashed.Load():
		err = ErrCrashed
	case h.node.dir && op != "sync" && op != "stat":
		err = syscall.EISDIR
	case write && !h.write:
		err = syscall.EBADF
	}
	if err != nil {
		return pathErr(op, h.name, err)
	}
	return nil
}

// mutate runs fn on the file's contents if op may run. It holds the FS's
// freeze lock, so a crash sees all of fn or none of it, and an op that
// returned nil happened before any crash that follows.
func (h *memHandle) mutate(op string, fn func(f *memFile)) error {
	h.fs.freeze.RLock()
	defer h.fs.freeze.RUnlock()
	if err := h.check(op, true); err != nil {
		return err
	}
	f := h.node.file
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
	return nil
}

func (h *memHandle) Read(p []byte) (int, error) {
	if err := h.check("read", false); err != nil {
		return 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.node.file.readAt(p, h.off)
	h.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (h *memHandle) ReadAt(p []byte, off int64) (int, error) {
	if err := h.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", h.name, syscall.EINVAL)
	}
	return h.node.file.readAt(p, off)
}

// readAt reads as [io.ReaderAt] does: fewer bytes than len(p) come with io.EOF.
func (f *memFile) readAt(p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if off >= int64(len(f.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *memHandle) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.mutate("write", func(f *memFile) { f.writeAt(p, int(h.off)) })
	if err != nil {
		return 0, err
	}
	h.off += int64(len(p))
	return len(p), nil
}

func (h *memHandle) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("writeat", h.name, syscall.EINVAL)
	}
	if err := h.mutate("write", func(f *memFile) { f.writeAt(p, int(off)) }); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *memHandle) Truncate(size int64) error {
	if size < 0 {
		return pathErr("truncate", h.name, syscall.EINVAL)
	}
	return h.mutate("truncate", func(f *memFile) { f.truncate(int(size)) })
}

// Sync makes the file's bytes durable; on a directory it is SyncDir. As
// fsync(2) does, it works on a read-only handle too.
func (h *memHandle) Sync() error {
	h.fs.freeze.RLock()
	defer h.fs.freeze.RUnlock()
	if err := h.check("sync", false); err != nil {
		return err
	}
	if h.node.dir {
		h.fs.mu.Lock()
		defer h.fs.mu.Unlock()
	}
	h.node.sync()
	return nil
}

func (h *memHandle) Stat() (os.FileInfo, error) {
	if err := h.check("stat", false); err != nil {
		return nil, err
	}
	return h.node.info(filepath.Base(h.name)), nil
}

func (h *memHandle) Close() error {
	if h.closed.Swap(true) {
		return pathErr("close", h.name, os.ErrClosed)
	}
	if h.gen.crashed.Load() {
		return pathErr("close", h.name, ErrCrashed)
	}
	return nil
}

var _ File = (*memHandle)(nil)

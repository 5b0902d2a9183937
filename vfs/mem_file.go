package vfs

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// memPageSize is the granularity at which a MemFS file remembers the durable
// bytes that unsynced writes overwrote.
const memPageSize = 4 << 10

// memChunkSize is the size of the blocks a MemFS file's bytes are kept in.
// A file grows a block at a time, so appending never copies what is already
// written. It is a multiple of memPageSize.
const memChunkSize = 64 << 10

// memFile is the contents of a MemFS file.
//
// The current bytes are kept in chunks: every chunk but the last holds
// memChunkSize bytes; the last holds the rest and, in a file's first chunk
// only, grows as a slice does, so small files stay small. The chunks hold
// the first filled bytes; the rest, up to size, is a hole that reads as
// zeros and takes no memory until it is written, as a file system leaves a
// file that Truncate extended (an index preallocated and never filled
// costs nothing).
//
// The durable bytes are not a second copy: they are the first syncedLen
// current bytes with the pages in undo laid over them. Before a write or a
// truncate changes a byte below syncedLen, the page holding it is saved in
// undo (once per sync). So Sync costs O(pages overwritten since the last
// sync) — O(1) for an appended log — and only a crash pays for assembling
// the durable bytes.
//
// Invariant: every page that starts below syncedLen is either in undo or
// unchanged since the last sync and wholly below size.
type memFile struct {
	mu        sync.RWMutex
	chunks    [][]byte
	filled    int // bytes held in chunks; filled <= size
	size      int
	syncedLen int // size at the last sync
	undo      map[int][]byte
	modTime   time.Time
}

// newMemFile returns a synced file holding b, which it keeps.
func newMemFile(b []byte) *memFile {
	f := &memFile{filled: len(b), size: len(b), syncedLen: len(b), modTime: time.Now()}
	for i := 0; i < len(b); i += memChunkSize {
		j := min(i+memChunkSize, len(b))
		f.chunks = append(f.chunks, b[i:j:j])
	}
	return f
}

// read copies the bytes at [off, off+len(p)), all below size, into p.
func (f *memFile) read(p []byte, off int) {
	if off+len(p) > f.size {
		panic("vfs: MemFS file access past its end")
	}
	for len(p) > 0 && off < f.filled {
		n := copy(p[:min(len(p), f.filled-off)], f.chunks[off/memChunkSize][off%memChunkSize:])
		p, off = p[n:], off+n
	}
	clear(p) // the hole
}

// overwrite copies p over the bytes at [off, off+len(p)), all below filled.
func (f *memFile) overwrite(p []byte, off int) {
	for len(p) > 0 {
		n := copy(f.chunks[off/memChunkSize][off%memChunkSize:], p)
		if n == 0 {
			panic("vfs: MemFS file access past its end")
		}
		p, off = p[n:], off+n
	}
}

// fill appends p to the filled bytes, or n zeros if p is nil, and grows size
// to cover them.
func (f *memFile) fill(p []byte, n int) {
	if p != nil {
		n = len(p)
	}
	for n > 0 {
		if len(f.chunks) == 0 || len(f.chunks[len(f.chunks)-1]) == memChunkSize {
			var c []byte
			if len(f.chunks) > 0 {
				c = make([]byte, 0, memChunkSize)
			}
			f.chunks = append(f.chunks, c)
		}
		last := &f.chunks[len(f.chunks)-1]
		l := len(*last)
		k := min(n, memChunkSize-l)
		if l+k > cap(*last) {
			c := make([]byte, l, min(memChunkSize, max(2*cap(*last), l+k, 512)))
			copy(c, *last)
			*last = c
		}
		*last = (*last)[:l+k]
		if p != nil {
			copy((*last)[l:], p[:k])
			p = p[k:]
		} else {
			clear((*last)[l:])
		}
		n -= k
		f.filled += k
	}
	f.size = max(f.size, f.filled)
}

// shrink drops the bytes from size on.
func (f *memFile) shrink(size int) {
	if size < f.filled {
		n := (size + memChunkSize - 1) / memChunkSize
		clear(f.chunks[n:])
		f.chunks = f.chunks[:n]
		if n > 0 {
			f.chunks[n-1] = f.chunks[n-1][:size-(n-1)*memChunkSize]
		} else {
			f.chunks = nil
		}
		f.filled = size
	}
	f.size = size
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
		b := make([]byte, min(start+memPageSize, f.syncedLen)-start)
		f.read(b, start)
		f.undo[pg] = b
	}
}

func (f *memFile) writeAt(p []byte, off int) {
	end := off + len(p)
	f.save(off, end)
	if off > f.filled {
		f.fill(nil, off-f.filled) // what the write skips of the hole
	}
	n := min(len(p), f.filled-off)
	f.overwrite(p[:n], off)
	f.fill(p[n:], 0)
	f.modTime = time.Now()
}

func (f *memFile) truncate(size int) {
	switch {
	case size < f.size:
		f.save(size, f.size)
		f.shrink(size)
	case size > f.size:
		f.size = size // a hole
	}
	f.modTime = time.Now()
}

func (f *memFile) sync() {
	f.syncedLen = f.size
	f.undo = nil
}

// durableBytes returns a copy of the durable contents, plus with rng a torn
// part of the unsynced appended tail (see MemFS.CrashWithTornWrites).
func (f *memFile) durableBytes(rng *rand.Rand) []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]byte, f.syncedLen)
	f.read(out[:min(f.size, f.syncedLen)], 0)
	for pg, b := range f.undo {
		copy(out[pg*memPageSize:], b)
	}
	if rng != nil && f.size > f.syncedLen {
		tail := make([]byte, f.size-f.syncedLen)
		f.read(tail, f.syncedLen)
		out = append(out, tornTail(rng, tail)...)
	}
	return out
}

// tornTail returns what a crash may leave of tail, bytes written but not
// synced: a random prefix, in which a random run may be zeros or garbage.
// It may change tail.
func tornTail(rng *rand.Rand, tail []byte) []byte {
	k := rng.IntN(len(tail) + 1)
	kept := tail[:k]
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
	if off >= int64(f.size) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := min(len(p), f.size-int(off))
	f.read(p[:n], int(off))
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

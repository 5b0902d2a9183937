package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
)

// fsm is the Raft state machine: the metadata image, changed only by
// committed entries. Readers get immutable copies and wait for versions;
// nothing they do can block Apply.
type fsm struct {
	log *slog.Logger

	mu      sync.Mutex
	img     *Image        // modified in place by apply and restore
	frozen  *Image        // immutable copy of img, made on demand, nil when stale
	changed chan struct{} // closed (and replaced) whenever img changes
	closed  chan struct{}
	isShut  bool
}

var (
	_ raft.BatchingFSM = (*fsm)(nil)
	_ raft.FSMSnapshot = (*fsmSnapshot)(nil)
)

func newFSM(log *slog.Logger) *fsm {
	return &fsm{log: log, img: newImage(), changed: make(chan struct{}), closed: make(chan struct{})}
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM. Each command entry's records are
// applied in order; a record that fails to decode or apply is skipped
// identically on every member and its entry's response is the error (nil
// otherwise). The version becomes the index of the last command entry.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, len(logs))
	decoded := make([][]record, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		recs, err := decodeEntry(l.Data)
		if err != nil {
			resp[i] = fmt.Errorf("entry %d: %w", l.Index, err)
			f.log.Error("controller: skipping undecodable metadata entry", "index", l.Index, "err", err)
		}
		decoded[i] = recs
	}
	f.mu.Lock()
	changed := false
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		for _, r := range decoded[i] {
			if err := f.img.apply(r); err != nil {
				f.log.Error("controller: skipping inapplicable metadata record", "index", l.Index, "err", err)
				if resp[i] == nil {
					resp[i] = fmt.Errorf("entry %d: %w", l.Index, err)
				}
			}
		}
		f.img.version = l.Index
		changed = true
	}
	if changed {
		f.frozen = nil
		close(f.changed)
		f.changed = make(chan struct{})
	}
	f.mu.Unlock()
	return resp
}

// Snapshot implements raft.FSM: a copy-on-write clone, cheap enough to take
// on the FSM goroutine; Persist encodes it while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fsmSnapshot{img: f.img.clone()}, nil
}

// Restore implements raft.FSM: the image is replaced by the snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("controller: read snapshot: %w", err)
	}
	img, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.img = img
	f.frozen = nil
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return nil
}

type fsmSnapshot struct{ img *Image }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(encodeSnapshot(nil, s.img)); err != nil {
		sink.Cancel()
		return fmt.Errorf("controller: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// image returns the current image, immutable.
func (f *fsm) image() *Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imageLocked()
}

func (f *fsm) imageLocked() *Image {
	if f.frozen == nil {
		f.frozen = f.img.clone()
	}
	return f.frozen
}

// working returns a private, modifiable copy of the current image.
func (f *fsm) working() *Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img.clone()
}

// wait returns the image as soon as its version is above after.
func (f *fsm) wait(ctx context.Context, after uint64) (*Image, error) {
	for {
		f.mu.Lock()
		if f.img.version > after {
			img := f.imageLocked()
			f.mu.Unlock()
			return img, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-f.closed:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// shut wakes every waiter with ErrClosed.
func (f *fsm) shut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.isShut {
		f.isShut = true
		close(f.closed)
	}
}

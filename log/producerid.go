package log

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/strata-log/strata/vfs"
)

// Producer ids, as Kafka hands them out for InitProducerId: in blocks (1000
// ids, Kafka's PRODUCER_ID_BLOCK_SIZE), each block recorded durably before
// any id of it is given, so that no id is ever given twice, across restarts
// and crashes included. A crash loses the rest of the current block, as in
// Kafka. A standalone broker records its blocks in a file of its data dir
// (FileProducerIDBlocks); a cluster can plug in blocks allocated by its
// controller (Kafka's AllocateProducerIds) through ProducerIDBlockSource.

// DefaultProducerIDBlockSize is Kafka's PRODUCER_ID_BLOCK_SIZE.
const DefaultProducerIDBlockSize = 1000

// producerIDBlockFile is the file, in the data dir, of the last block given.
const producerIDBlockFile = "producer-id-block"

// ErrProducerIDsExhausted: the int64 producer id space is used up.
var ErrProducerIDsExhausted = errors.New("log: producer ids exhausted")

// ProducerIDBlock is the producer ids [Start, Start+Len).
type ProducerIDBlock struct {
	Start int64
	Len   int
}

// End is the block's last id.
func (b ProducerIDBlock) End() int64 { return b.Start + int64(b.Len) - 1 }

// ProducerIDBlockSource hands out blocks of producer ids. Contract: a block
// is returned only once it is durably reserved, so no id of it is in any
// block returned later, by this source or by any source over the same
// storage after a restart or a crash. Calls are serialized by the caller.
type ProducerIDBlockSource interface {
	NextProducerIDBlock(ctx context.Context) (ProducerIDBlock, error)
}

// FileProducerIDBlocks is the ProducerIDBlockSource of a standalone broker:
// the last block given is in the file producer-id-block of the data dir,
// replaced atomically and durably before the block is returned, in the
// JSON of Kafka's ZooKeeper node /latest_producer_id_block:
//
//	{"version":1,"broker":0,"block_start":"1000","block_end":"1999"}
type FileProducerIDBlocks struct {
	fs        vfs.FS
	path      string
	blockSize int

	mu   sync.Mutex
	next int64 // the start of the next block
}

// producerIDBlockJSON is the file's content.
type producerIDBlockJSON struct {
	Version    int    `json:"version"`
	Broker     int    `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

// OpenProducerIDBlocks reads the block file of the data dir dir (none: ids
// start at 0). blockSize <= 0 means DefaultProducerIDBlockSize. A file that
// does not parse is ErrCorrupt: guessing could give an id twice.
func OpenProducerIDBlocks(fs vfs.FS, dir string, blockSize int) (*FileProducerIDBlocks, error) {
	if blockSize <= 0 {
		blockSize = DefaultProducerIDBlockSize
	}
	f := &FileProducerIDBlocks{fs: fs, path: filepath.Join(dir, producerIDBlockFile), blockSize: blockSize}
	data, err := vfs.ReadFile(fs, f.path)
	if isNotExist(err) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log: read %s: %w", f.path, err)
	}
	var j producerIDBlockJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("log: %s: %w: %v", f.path, ErrCorrupt, err)
	}
	start, err1 := strconv.ParseInt(j.BlockStart, 10, 64)
	end, err2 := strconv.ParseInt(j.BlockEnd, 10, 64)
	if j.Version != 1 || err1 != nil || err2 != nil || start < 0 || end < start {
		return nil, fmt.Errorf("log: %s: %w: block %q-%q, version %d", f.path, ErrCorrupt, j.BlockStart, j.BlockEnd, j.Version)
	}
	if end == math.MaxInt64 {
		f.next = -1 // exhausted
	} else {
		f.next = end + 1
	}
	return f, nil
}

// NextProducerIDBlock reserves the next block in the file and returns it.
// On an error nothing is reserved as far as the caller knows; the next call
// tries the same block again.
func (f *FileProducerIDBlocks) NextProducerIDBlock(ctx context.Context) (ProducerIDBlock, error) {
	if err := ctx.Err(); err != nil {
		return ProducerIDBlock{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next < 0 || f.next > math.MaxInt64-int64(f.blockSize)+1 {
		return ProducerIDBlock{}, ErrProducerIDsExhausted
	}
	b := ProducerIDBlock{Start: f.next, Len: f.blockSize}
	data, err := json.Marshal(producerIDBlockJSON{
		Version:    1,
		BlockStart: strconv.FormatInt(b.Start, 10),
		BlockEnd:   strconv.FormatInt(b.End(), 10),
	})
	if err != nil {
		return ProducerIDBlock{}, err
	}
	if err := vfs.WriteFileAtomic(f.fs, f.path, data); err != nil {
		return ProducerIDBlock{}, fmt.Errorf("log: reserve producer ids %d-%d: %w", b.Start, b.End(), err)
	}
	if b.End() == math.MaxInt64 {
		f.next = -1
	} else {
		f.next = b.End() + 1
	}
	return b, nil
}

// ProducerIDAllocator gives producer ids from the blocks of a source, for an
// InitProducerID-like call. It is safe for concurrent use.
type ProducerIDAllocator struct {
	src ProducerIDBlockSource

	mu    sync.Mutex
	block ProducerIDBlock
	next  int64 // the next id of block, if block.Len > 0
}

// NewProducerIDAllocator returns an allocator over src. It reserves nothing
// until the first id is asked for.
func NewProducerIDAllocator(src ProducerIDBlockSource) *ProducerIDAllocator {
	return &ProducerIDAllocator{src: src}
}

// InitProducerID returns a new producer id, never given before, with epoch
// 0, as Kafka's InitProducerId does for an idempotent producer without a
// transactional id. (Such a producer bumps its epoch itself, KIP-360, and
// asks for a new id when the epoch would pass math.MaxInt16.)
func (a *ProducerIDAllocator) InitProducerID(ctx context.Context) (id int64, epoch int16, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.block.Len == 0 {
		b, err := a.src.NextProducerIDBlock(ctx)
		if err != nil {
			return NoProducerID, noProducerEpoch, err
		}
		if b.Start < 0 || b.Len <= 0 {
			return NoProducerID, noProducerEpoch, fmt.Errorf("log: producer id source gave the invalid block %d+%d", b.Start, b.Len)
		}
		a.block, a.next = b, b.Start
	}
	id = a.next
	if id == a.block.End() {
		a.block = ProducerIDBlock{} // used up; and a.next+1 could overflow
	} else {
		a.next++
	}
	return id, 0, nil
}

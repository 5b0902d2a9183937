package log

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-log/strata/segment"
)

// finishCleaning completes or discards, before p's segments are loaded,
// what a crash left of a cleaning pass in its directory, as Kafka's
// LogLoader does:
//
//   - a file with the .cleaned suffix is a cleaned segment that was not
//     committed: it is deleted (the segments it would have replaced are all
//     there);
//   - a .log.swap file is a committed cleaned segment: the swap is
//     completed, its indexes and then its .log renamed to their final names
//     (replacing the first segment it replaces); the load then deletes the
//     other replaced segments, which lie inside its offsets;
//   - an .index.swap, .timeindex.swap or .txnindex.swap without its
//     .log.swap belongs to a swap whose .log was renamed already: it is
//     deleted.
//
// It returns the base offsets of the segments whose indexes the load must
// rebuild from their .log (recovery): those of completed swaps.
func (p *Partition) finishCleaning() (map[int64]bool, error) {
	names, err := p.fs.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("log: open %s: %w", p.dir, err)
	}
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	path := func(n string) string { return filepath.Join(p.dir, n) }
	forced := map[int64]bool{}
	changed := false
	for _, n := range names {
		if strings.HasSuffix(n, segment.CleanedSuffix) {
			if err := p.fs.Remove(path(n)); err != nil && !isNotExist(err) {
				return nil, fmt.Errorf("log: open %s: remove %s: %w", p, n, err)
			}
			changed = true
		}
	}
	baseOf := func(n, ext string) (int64, bool) {
		base, err := strconv.ParseInt(strings.TrimSuffix(n, ext+segment.SwapSuffix), 10, 64)
		return base, err == nil && base >= 0 && strings.HasSuffix(n, ext+segment.SwapSuffix)
	}
	for _, n := range names {
		base, ok := baseOf(n, ".log")
		if !ok {
			continue
		}
		p.logger.Info("completing an interrupted swap of cleaned segments", "partition", p.String(), "segment", base)
		for _, ext := range []string{".index", ".timeindex", ".txnindex", ".log"} {
			from := segment.Name(base, ext) + segment.SwapSuffix
			if !has[from] {
				continue
			}
			if err := p.fs.Rename(path(from), path(segment.Name(base, ext))); err != nil {
				return nil, fmt.Errorf("log: open %s: complete swap: %w", p, err)
			}
			delete(has, from)
		}
		forced[base] = true
		changed = true
	}
	for _, n := range names {
		for _, ext := range []string{".index", ".timeindex", ".txnindex"} {
			if base, ok := baseOf(n, ext); ok && has[n] {
				if err := p.fs.Remove(path(n)); err != nil && !isNotExist(err) {
					return nil, fmt.Errorf("log: open %s: remove %s: %w", p, n, err)
				}
				forced[base] = true
				changed = true
			}
		}
	}
	if changed {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return nil, fmt.Errorf("log: sync dir %s: %w", p.dir, err)
		}
	}
	return forced, nil
}

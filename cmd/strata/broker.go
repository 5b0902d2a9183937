package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/strata-log/strata/log"
)

// openBroker opens the target's data dir with log.Open. create says the
// command may create a data dir that does not exist (topics create);
// others refuse a missing one rather than leave an empty data dir behind.
// The library's warnings (a recovered tail, say) go to stderr.
func openBroker(e *env, t *target, create bool) (*log.Broker, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if !create {
		st, err := os.Stat(t.dataDir)
		if err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("data dir %s is not a directory", t.dataDir)
		}
		// log.Open would make any directory a data dir; only create does.
		_, err1 := os.Stat(filepath.Join(t.dataDir, topicsFile))
		_, err2 := os.Stat(filepath.Join(t.dataDir, ".lock"))
		if err1 != nil && err2 != nil {
			return nil, fmt.Errorf("%s is not a Strata data dir (no %s): create a topic in it with 'strata topics --data-dir %s create --topic T'", t.dataDir, topicsFile, t.dataDir)
		}
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := log.Open(t.dataDir, log.Config{Logger: logger})
	if errors.Is(err, log.ErrDirInUse) {
		return nil, fmt.Errorf("data dir %s is in use by a running broker: stop it first, or talk to the broker with --bootstrap-server (%w)", t.dataDir, err)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// closeBroker closes b and keeps the first error.
func closeBroker(b *log.Broker, err *error) {
	if cerr := b.Close(); *err == nil && cerr != nil {
		*err = fmt.Errorf("close data dir: %w", cerr)
	}
}

package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hclogAdapter routes hashicorp/raft's logging to a *slog.Logger: raft's
// Warn and Error keep their level, its Info (elections, state changes) is
// lowered to Debug, and its Debug and Trace are dropped. Some of its
// messages are judged here rather than by raft's level (see judge): the
// events of a normal failover are Info, a peer that cannot be reached is
// one Warn a minute, and this member's own connections closing is Debug.
type hclogAdapter struct {
	log   *slog.Logger
	name  string
	args  []any
	limit *logLimiter // shared by every copy (With, Named)
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: l, name: name, limit: newLogLimiter(time.Minute, time.Now)}
}

// Raft's messages about a peer it failed to reach: a dead peer makes them
// over and over (a heartbeat every 0.6 s).
var peerFailures = map[string]bool{
	"failed to heartbeat to":                  true,
	"failed to appendEntries to":              true,
	"failed to pipeline appendEntries":        true,
	"failed to make requestVote RPC":          true,
	"failed to contact":                       true,
	"failed to send snapshot to":              true,
	"failed to start pipeline replication to": true,
}

// Raft's messages about what a failover does, at Warn or Error in raft:
// nothing an operator must act on.
var failoverEvents = map[string]bool{
	"heartbeat timeout reached, starting election":               true,
	"Election timeout reached, restarting election":              true,
	"new leader elected, stepping down":                          true,
	"rejecting vote request since we have a leader":              true,
	"rejecting pre-vote request since we have a leader":          true,
	"rejecting vote request since our last term is greater":      true,
	"rejecting pre-vote request since our last term is greater":  true,
	"rejecting vote request since our last index is greater":     true,
	"rejecting pre-vote request since our last index is greater": true,
	"duplicate requestVote from":                                 true,
	"appendEntries rejected, sending older logs":                 true,
	"peer has newer term, stopping replication":                  true,
	"skipping application of old log":                            true,
	"previous log term mis-match":                                true,
	"clearing log suffix":                                        true,
}

// judge returns the level a raft message is logged at, and false when it
// is not logged at all.
func (h *hclogAdapter) judge(level hclog.Level, msg string, args []any) (slog.Level, bool) {
	l, ok := h.slogLevel(level)
	if !ok || level < hclog.Warn {
		return l, ok
	}
	if closing(args) {
		// This member's own connections closing (a clean stop), or a
		// peer's going away: "use of closed network connection", EOF,
		// a reset. A peer that stays away is peerHealth's to log.
		return slog.LevelDebug, true
	}
	switch {
	case failoverEvents[msg]:
		return slog.LevelInfo, true
	case peerFailures[msg] && isDialError(args) && (msg == "failed to heartbeat to" || msg == "failed to appendEntries to"):
		// A peer that is down: the transport says so (peerHealth).
		return slog.LevelDebug, true
	case peerFailures[msg]:
		return slog.LevelWarn, h.limit.allow(msg + " " + peerOf(args))
	}
	return l, true
}

// closing reports whether a message's error is a connection closing.
func closing(args []any) bool {
	for _, a := range args {
		if err, ok := a.(error); ok {
			return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
				errors.Is(err, syscall.EPIPE) || errors.Is(err, raft.ErrTransportShutdown) ||
				errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, ErrClosed)
		}
	}
	return false
}

// isDialError reports whether a message's error is a peer that could not
// be reached at all.
func isDialError(args []any) bool {
	for _, a := range args {
		if err, ok := a.(error); ok {
			var de *dialError
			return errors.As(err, &de)
		}
	}
	return false
}

// peerOf returns the value following a "peer", "server-id" or "target"
// key, formatted.
func peerOf(args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "peer", "server-id", "target":
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

// logLimiter lets a key through at most once every period.
type logLimiter struct {
	period time.Duration
	now    func() time.Time
	mu     sync.Mutex
	last   map[string]time.Time
}

func newLogLimiter(period time.Duration, now func() time.Time) *logLimiter {
	return &logLimiter{period: period, now: now, last: map[string]time.Time{}}
}

func (l *logLimiter) allow(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.period {
		return false
	}
	if len(l.last) > 1024 {
		clear(l.last) // keys are peers: a handful; never grow without bound
	}
	l.last[key] = now
	return true
}

func (h *hclogAdapter) slogLevel(level hclog.Level) (slog.Level, bool) {
	switch level {
	case hclog.Info:
		return slog.LevelDebug, true
	case hclog.Warn:
		return slog.LevelWarn, true
	case hclog.Error:
		return slog.LevelError, true
	}
	return 0, false
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	l, ok := h.judge(level, msg, args)
	if !ok || !h.log.Enabled(context.Background(), l) {
		return
	}
	all := make([]any, 0, 2+len(h.args)+len(args))
	all = append(all, "component", h.name)
	all = append(all, h.args...)
	all = append(all, args...)
	h.log.Log(context.Background(), l, msg, all...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) {}
func (h *hclogAdapter) Debug(msg string, args ...any) {}
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(level hclog.Level) bool {
	l, ok := h.slogLevel(level)
	return ok && h.log.Enabled(context.Background(), l)
}

func (h *hclogAdapter) IsTrace() bool { return false }
func (h *hclogAdapter) IsDebug() bool { return false }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogAdapter) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.args }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hclogAdapter) SetLevel(hclog.Level)  {}
func (h *hclogAdapter) GetLevel() hclog.Level { return hclog.Info }

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Warn(string(bytes.TrimSpace(p)))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

package controller

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes hashicorp/raft's logging to a *slog.Logger: raft's
// Warn and Error keep their level, its Info (elections, state changes) is
// lowered to Debug, and its Debug and Trace are dropped.
type hclogAdapter struct {
	log  *slog.Logger
	name string
	args []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: l, name: name}
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
	l, ok := h.slogLevel(level)
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

package devstack

import (
	"context"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger adapts slog to the Temporal server's logger interface. The
// server is chatty at info level; only records at min or above pass.
type serverLogger struct {
	l   *slog.Logger
	min *slog.LevelVar
}

var _ log.Logger = serverLogger{}

func (s serverLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < s.min.Level() || !s.l.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	s.l.LogAttrs(context.Background(), level, msg, attrs...)
}

func (s serverLogger) Debug(msg string, tags ...tag.Tag)  { s.emit(slog.LevelDebug, msg, tags) }
func (s serverLogger) Info(msg string, tags ...tag.Tag)   { s.emit(slog.LevelInfo, msg, tags) }
func (s serverLogger) Warn(msg string, tags ...tag.Tag)   { s.emit(slog.LevelWarn, msg, tags) }
func (s serverLogger) Error(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s serverLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }
func (s serverLogger) Panic(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	panic(msg)
}
func (s serverLogger) Fatal(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	panic(msg)
}

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
	panic(newFatalError(msg, tags))
}
func (s serverLogger) Fatal(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	panic(newFatalError(msg, tags))
}

// FatalError is a failure the server reported as fatal (it cannot bind a
// port, say); Start returns it when it happens in Start's own goroutine,
// as binding the gRPC ports does while the server is built. One reported
// from a goroutine of the server's (a membership or serving failure once
// it runs) still ends the process.
type FatalError struct {
	// Msg is the server's message.
	Msg string
	// Err is the error the server tagged the message with, if any.
	Err error
}

func newFatalError(msg string, tags []tag.Tag) *FatalError {
	f := &FatalError{Msg: msg}
	for _, t := range tags {
		if z, ok := t.(tag.ZapTag); ok {
			if err, ok := z.Field().Interface.(error); ok {
				f.Err = err
			}
		}
	}
	return f
}

// Error implements error.
func (f *FatalError) Error() string {
	if f.Err == nil {
		return "temporal server: " + f.Msg
	}
	return "temporal server: " + f.Msg + ": " + f.Err.Error()
}

// Unwrap returns Err.
func (f *FatalError) Unwrap() error { return f.Err }

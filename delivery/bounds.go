package delivery

import (
	"fmt"
	"strings"
	"time"
)

// Bounds of the settings an endpoint may set.
const (
	// MaxScheduleLength is the most attempts a cycle may make.
	MaxScheduleLength = 20
	// MaxWait is the longest wait before one attempt.
	MaxWait = 24 * time.Hour
	// MinDeadline and MaxDeadline bound a cycle's deadline.
	MinDeadline = time.Second
	MaxDeadline = 72 * time.Hour
	// MinRequestTimeout and MaxRequestTimeout bound one attempt.
	MinRequestTimeout = 100 * time.Millisecond
	MaxRequestTimeout = time.Minute
	// RotationGraceDefault is how long a rotated secret keeps signing.
	RotationGraceDefault = 24 * time.Hour
	// MaxRotationGrace is the longest grace a rotation may ask for.
	MaxRotationGrace = 7 * 24 * time.Hour
)

// Validate checks the settings an endpoint set against the bounds; the
// error is a *FieldError naming the API field at fault. Zero values (the
// defaults apply) are valid.
func (s Settings) Validate() error {
	if s.Schedule != nil {
		if len(s.Schedule) < 1 || len(s.Schedule) > MaxScheduleLength {
			return &FieldError{Field: "retry_schedule", Reason: fmt.Sprintf("must hold 1–%d durations", MaxScheduleLength)}
		}
		for _, w := range s.Schedule {
			if w < 0 || w > MaxWait {
				return &FieldError{Field: "retry_schedule", Reason: fmt.Sprintf("%s is not a wait from 0s to %s", w, MaxWait)}
			}
		}
	}
	if s.Deadline != 0 && (s.Deadline < MinDeadline || s.Deadline > MaxDeadline) {
		return &FieldError{Field: "deadline", Reason: fmt.Sprintf("must be from %s to %s", MinDeadline, MaxDeadline)}
	}
	if s.RequestTimeout != 0 && (s.RequestTimeout < MinRequestTimeout || s.RequestTimeout > MaxRequestTimeout) {
		return &FieldError{Field: "request_timeout", Reason: fmt.Sprintf("must be from %s to %s", MinRequestTimeout, MaxRequestTimeout)}
	}
	if d := s.WithDefaults(); d.RequestTimeout >= d.Deadline {
		return &FieldError{Field: "request_timeout", Reason: "must be shorter than deadline"}
	}
	return nil
}

// ReservedHeader reports whether hookrelay sets the header itself on every
// attempt, so an endpoint's custom headers may not name it.
func ReservedHeader(name string) bool {
	switch n := strings.ToLower(name); {
	case strings.HasPrefix(n, "webhook-"):
		return true
	default:
		switch n {
		case "x-webhook-signature", "content-type", "user-agent", "host", "content-length", "traceparent", "tracestate":
			return true
		}
	}
	return false
}

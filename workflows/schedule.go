package workflows

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Delivery defaults (CONTRACT §4 and §5).
var defaultSchedule = [...]time.Duration{
	1 * time.Second, 5 * time.Second, 30 * time.Second,
	2 * time.Minute, 10 * time.Minute, 60 * time.Minute,
}

const (
	// DeadlineDefault bounds a delivery cycle from its start.
	DeadlineDefault = 75 * time.Minute
	// RequestTimeoutDefault bounds one attempt.
	RequestTimeoutDefault = 10 * time.Second
	// RetentionDefault is how long a dead letter waits for a replay.
	RetentionDefault = 7 * 24 * time.Hour
	// JitterFraction is the largest jitter, as a fraction of a wait.
	JitterFraction = 0.10
)

// DefaultSchedule returns the default waits before attempts 1..6.
func DefaultSchedule() []time.Duration { return append([]time.Duration(nil), defaultSchedule[:]...) }

// Settings are a delivery's retry settings, resolved once at start from the
// endpoint and frozen in the workflow input so replays are deterministic.
type Settings struct {
	// Schedule holds the waits before each attempt; its length is the
	// number of attempts per cycle.
	Schedule       []time.Duration
	Deadline       time.Duration
	RequestTimeout time.Duration
	Retention      time.Duration
}

// WithDefaults fills unset fields with the defaults.
func (s Settings) WithDefaults() Settings {
	if len(s.Schedule) == 0 {
		s.Schedule = DefaultSchedule()
	}
	if s.Deadline <= 0 {
		s.Deadline = DeadlineDefault
	}
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = RequestTimeoutDefault
	}
	if s.Retention <= 0 {
		s.Retention = RetentionDefault
	}
	return s
}

// Jitter returns wait moved by a deterministic amount within
// ±JitterFraction, derived from the delivery ID and attempt number, so every
// replay of the workflow computes the same value.
func Jitter(wait time.Duration, deliveryID string, attempt int) time.Duration {
	if wait <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(deliveryID))
	h.Write([]byte{'/'})
	h.Write([]byte(strconv.Itoa(attempt)))
	// u in [-1, 1)
	u := float64(h.Sum64()>>11)/float64(1<<53)*2 - 1
	return (wait + time.Duration(float64(wait)*JitterFraction*u)).Round(time.Millisecond)
}

package delivery

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// JSONDuration is a time.Duration that JSON-encodes as a Go duration string
// ("30s", "1h15m0s"), so Temporal payloads read as text in the Web UI. It
// decodes from such a string or from a number of nanoseconds: payloads
// recorded before it hold numbers.
type JSONDuration time.Duration

// DurationError is a JSON duration that is neither a number nor a Go
// duration string.
type DurationError struct {
	Value string
	Err   error
}

func (e *DurationError) Error() string { return "duration " + e.Value + ": " + e.Err.Error() }

func (e *DurationError) Unwrap() error { return e.Err }

// MarshalJSON writes d as a Go duration string.
func (d JSONDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string or a number of nanoseconds;
// null leaves d unchanged.
func (d *JSONDuration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return &DurationError{Value: string(b), Err: err}
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return &DurationError{Value: string(b), Err: err}
		}
		*d = JSONDuration(v)
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		// A float such as 3e+10 (never written by encoding/json for an
		// int64, but valid JSON).
		f, ferr := strconv.ParseFloat(string(b), 64)
		if ferr != nil {
			return &DurationError{Value: string(b), Err: err}
		}
		v = int64(f)
	}
	*d = JSONDuration(v)
	return nil
}

// settingsJSON is Settings as JSON: the same field names, durations as
// strings.
type settingsJSON struct {
	Schedule       []JSONDuration
	Deadline       JSONDuration
	RequestTimeout JSONDuration
	Retention      JSONDuration
}

// MarshalJSON writes s with its durations as Go duration strings.
func (s Settings) MarshalJSON() ([]byte, error) {
	v := settingsJSON{
		Deadline: JSONDuration(s.Deadline), RequestTimeout: JSONDuration(s.RequestTimeout), Retention: JSONDuration(s.Retention),
	}
	if s.Schedule != nil {
		v.Schedule = make([]JSONDuration, len(s.Schedule))
		for i, w := range s.Schedule {
			v.Schedule[i] = JSONDuration(w)
		}
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads s with its durations as strings or as numbers of
// nanoseconds (payloads recorded before they were strings).
func (s *Settings) UnmarshalJSON(b []byte) error {
	var v settingsJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Settings{Deadline: time.Duration(v.Deadline), RequestTimeout: time.Duration(v.RequestTimeout), Retention: time.Duration(v.Retention)}
	if v.Schedule != nil {
		s.Schedule = make([]time.Duration, len(v.Schedule))
		for i, w := range v.Schedule {
			s.Schedule[i] = time.Duration(w)
		}
	}
	return nil
}

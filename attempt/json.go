package attempt

import (
	"encoding/json"
	"time"

	"hookrelay/delivery"
)

// MarshalJSON writes r with Timeout as a Go duration string ("10s").
func (r SendRequest) MarshalJSON() ([]byte, error) {
	type plain SendRequest
	return json.Marshal(struct {
		plain
		Timeout delivery.JSONDuration
	}{plain(r), delivery.JSONDuration(r.Timeout)})
}

// UnmarshalJSON reads r with Timeout as a string or as a number of
// nanoseconds (requests recorded before it was a string).
func (r *SendRequest) UnmarshalJSON(b []byte) error {
	type plain SendRequest
	v := struct {
		*plain
		Timeout delivery.JSONDuration
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.Timeout = time.Duration(v.Timeout)
	return nil
}

// MarshalJSON writes r with RetryAfter as a Go duration string.
func (r SendResult) MarshalJSON() ([]byte, error) {
	type plain SendResult
	return json.Marshal(struct {
		plain
		RetryAfter delivery.JSONDuration
	}{plain(r), delivery.JSONDuration(r.RetryAfter)})
}

// UnmarshalJSON reads r with RetryAfter as a string or as a number of
// nanoseconds (results recorded before it was a string).
func (r *SendResult) UnmarshalJSON(b []byte) error {
	type plain SendResult
	v := struct {
		*plain
		RetryAfter delivery.JSONDuration
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.RetryAfter = time.Duration(v.RetryAfter)
	return nil
}

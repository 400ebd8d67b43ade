package service

import (
	"errors"
	"fmt"
	"time"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// InvalidError is input at fault: Field names it ("" when no one field
// is), Detail says why in words a user can act on.
type InvalidError struct {
	Field, Detail string
}

func (e *InvalidError) Error() string { return e.Detail }

// Fields names the input at fault in err, for a problem's "fields": the
// Field of an InvalidError, TooLargeError, ForbiddenError or ConflictError
// (nil when err is none of them or names no field).
func Fields(err error) []string {
	var f interface{ fieldAtFault() string }
	if !errors.As(err, &f) || f.fieldAtFault() == "" {
		return nil
	}
	return []string{f.fieldAtFault()}
}

func (e *InvalidError) fieldAtFault() string   { return e.Field }
func (e *TooLargeError) fieldAtFault() string  { return e.Field }
func (e *ForbiddenError) fieldAtFault() string { return e.Field }
func (e *ConflictError) fieldAtFault() string  { return e.Field }

// TooLargeError is input past its size bound (Field names it).
type TooLargeError struct {
	Field, Detail string
}

func (e *TooLargeError) Error() string { return e.Detail }

// NotFoundError is an object (or, for a principal that may not reach it,
// a route) that does not exist as far as the caller may know.
type NotFoundError struct {
	Detail string
	err    error
}

func (e *NotFoundError) Error() string { return e.Detail }

// Unwrap is the store's error, if any (store.ErrNotFound).
func (e *NotFoundError) Unwrap() error { return e.err }

// ForbiddenError is a call the principal may not make (a portal session
// without the capability, or limited to some endpoints).
type ForbiddenError struct {
	// Field names the input the principal may not give ("" when the call
	// itself is refused).
	Field  string
	Detail string
}

func (e *ForbiddenError) Error() string { return e.Detail }

// ConflictError is a call the object's state refuses; Field names what
// is in the way.
type ConflictError struct {
	Field, Detail string
	err           error
}

func (e *ConflictError) Error() string { return e.Detail }

// Unwrap is the store's error, if any (store.ErrConflict).
func (e *ConflictError) Unwrap() error { return e.err }

// GoneError is an object that existed and was pruned.
type GoneError struct {
	Detail string
}

func (e *GoneError) Error() string { return e.Detail }

// UnavailableError is a dependency that cannot answer now; retry after
// RetryAfter.
type UnavailableError struct {
	RetryAfter time.Duration
	Detail     string
	err        error
}

func (e *UnavailableError) Error() string { return e.Detail }

// Unwrap is the cause.
func (e *UnavailableError) Unwrap() error { return e.err }

// Retry-After of the unavailable answers.
const (
	// DatabaseRetryAfter is when to retry after Postgres did not answer.
	DatabaseRetryAfter = 5 * time.Second
	// FiltersRetryAfter is when to retry after the filters could not be
	// compiled from a fresh catalog.
	FiltersRetryAfter = time.Second
)

// Typed turns an error of the store or the outbox into the service's
// typed error; a typed error and any other error (an internal one) are
// returned as they are. Every error a Service method returns is already
// typed; Typed is for the adapters' own calls (authentication, ingest).
func Typed(err error) error { return typed(err) }

func typed(err error) error {
	if err == nil {
		return nil
	}
	var (
		tooLarge *delivery.TooLargeError
		field    *delivery.FieldError
		types    *store.EventTypeLimitError
		cursor   *store.CursorError
		stale    *outbox.StaleFiltersError
		already  interface{ serviceError() }
	)
	switch {
	case errors.As(err, &already):
		return err
	case errors.As(err, &tooLarge):
		return &TooLargeError{Field: tooLarge.Field, Detail: err.Error()}
	case errors.As(err, &field):
		return &InvalidError{Field: field.Field, Detail: err.Error()}
	case errors.As(err, &types):
		return &InvalidError{Field: "type", Detail: err.Error()}
	case errors.As(err, &cursor):
		return &InvalidError{Field: "cursor", Detail: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return &NotFoundError{Detail: err.Error(), err: err}
	case errors.Is(err, store.ErrConflict):
		// The one store conflict that reaches here: an event ID reused
		// with another body.
		return &ConflictError{Field: "id", Detail: err.Error(), err: err}
	case store.IsUnavailable(err):
		return &UnavailableError{RetryAfter: DatabaseRetryAfter, Detail: "the database is unavailable; retry shortly", err: err}
	case errors.As(err, &stale):
		return &UnavailableError{RetryAfter: FiltersRetryAfter, Detail: err.Error(), err: err}
	}
	return err
}

func (*InvalidError) serviceError()     {}
func (*TooLargeError) serviceError()    {}
func (*NotFoundError) serviceError()    {}
func (*ForbiddenError) serviceError()   {}
func (*ConflictError) serviceError()    {}
func (*GoneError) serviceError()        {}
func (*UnavailableError) serviceError() {}

// invalidf is an *InvalidError of field.
func invalidf(field, format string, args ...any) error {
	return &InvalidError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// MsgNoSuchRoute is the detail of a route a principal's role does not
// reach: the same as for a route that does not exist.
const MsgNoSuchRoute = "no such route"

// Authorize reports whether p may reach the calls under app appID: a
// *NotFoundError, the answer of an app that does not exist, when it may
// not, so an app's key learns nothing of what lies outside its app.
func Authorize(p access.Principal, appID string) error {
	if p.ReachesApp(appID) {
		return nil
	}
	return &NotFoundError{Detail: fmt.Errorf("app %s: %w", appID, store.ErrNotFound).Error(), err: store.ErrNotFound}
}

// AdminOnly reports whether p may make an operator's call (apps, the
// catalog, keys): a *NotFoundError naming no route when it may not.
func AdminOnly(p access.Principal) error {
	if p.Role == access.RoleAdmin {
		return nil
	}
	return &NotFoundError{Detail: MsgNoSuchRoute}
}

// keyCall reports whether p may make a call of app appID that only an
// API key makes: minting a portal link, changing the app, reading its
// audit log. A portal session, whatever its capabilities, would widen its
// own reach with them; it is told the route does not exist.
func keyCall(p access.Principal, appID string) error {
	if err := Authorize(p, appID); err != nil {
		return err
	}
	if p.Kind != access.KindKey {
		return &NotFoundError{Detail: MsgNoSuchRoute}
	}
	return nil
}

// MsgNotAllowed is the detail of a call a portal session may not make.
const MsgNotAllowed = "this portal link does not allow that"

// can reports whether p may make a call of app appID needing capability
// cp (keys may do whatever their role reaches).
func can(p access.Principal, appID string, cp access.Capability) error {
	if err := Authorize(p, appID); err != nil {
		return err
	}
	if !p.Can(cp) {
		return &ForbiddenError{Detail: MsgNotAllowed}
	}
	return nil
}

// sees reports whether p may see endpoint id of app appID: a session
// limited to some endpoints sees no other, as if it did not exist.
func sees(p access.Principal, appID, id string) error {
	if err := Authorize(p, appID); err != nil {
		return err
	}
	if !p.SeesEndpoint(id) {
		return &NotFoundError{Detail: fmt.Errorf("endpoint %s: %w", id, store.ErrNotFound).Error(), err: store.ErrNotFound}
	}
	return nil
}

package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// Problem is an RFC 9457 problem document with the fields at fault.
type Problem struct {
	Type   string   `json:"type"`
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail,omitempty"`
	Fields []string `json:"fields,omitempty"`
}

func problem(c *gin.Context, status int, detail string, fields ...string) {
	typ := "about:blank"
	switch status {
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		typ = "https://hookrelay.dev/problems/invalid-request"
	case http.StatusNotFound:
		typ = "https://hookrelay.dev/problems/not-found"
	case http.StatusConflict:
		typ = "https://hookrelay.dev/problems/conflict"
	case http.StatusServiceUnavailable:
		typ = "https://hookrelay.dev/problems/unavailable"
	case http.StatusTooManyRequests:
		typ = "https://hookrelay.dev/problems/too-many-requests"
	}
	c.Abort()
	c.Render(status, problemJSON{Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail, Fields: fields}})
}

// problemJSON renders a Problem as application/problem+json.
type problemJSON struct{ p Problem }

func (r problemJSON) Render(w http.ResponseWriter) error {
	r.WriteContentType(w)
	return json.NewEncoder(w).Encode(r.p)
}

func (problemJSON) WriteContentType(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/problem+json")
}

// invalid is the problem of invalid input: 413 for a payload over its
// limit, 422 for a field at fault (an event type past its app's bound names
// type, a page cursor no list gave names cursor); nil for any other error.
func invalid(err error) *Problem {
	var tooLarge *delivery.TooLargeError
	var field *delivery.FieldError
	var types *store.EventTypeLimitError
	var cursor *store.CursorError
	switch {
	case errors.As(err, &tooLarge):
		return &Problem{Status: http.StatusRequestEntityTooLarge, Detail: err.Error(), Fields: []string{tooLarge.Field}}
	case errors.As(err, &field):
		return &Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error(), Fields: []string{field.Field}}
	case errors.As(err, &types):
		return &Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error(), Fields: []string{"type"}}
	case errors.As(err, &cursor):
		return &Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error(), Fields: []string{"cursor"}}
	}
	return nil
}

// fail maps an error to its answer by type: 413 and 422 for invalid input,
// 404, 409, 503 when Postgres is unreachable, else 500 (logged, no detail
// leaked).
func (s *Server) fail(c *gin.Context, err error) {
	if p := invalid(err); p != nil {
		problem(c, p.Status, p.Detail, p.Fields...)
		return
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		problem(c, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		// The one conflict that reaches here: an event ID reused with
		// another body.
		problem(c, http.StatusConflict, err.Error(), "id")
	case store.IsUnavailable(err):
		c.Header("Retry-After", "5")
		problem(c, http.StatusServiceUnavailable, "the database is unavailable; retry shortly")
	case errors.As(err, new(*outbox.StaleFiltersError)):
		c.Header("Retry-After", "1")
		problem(c, http.StatusServiceUnavailable, err.Error())
	default:
		s.logger.Error("request failed", "method", c.Request.Method, "route", c.FullPath(), "err", err)
		problem(c, http.StatusInternalServerError, "internal error")
	}
}

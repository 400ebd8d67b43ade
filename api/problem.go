package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/service"
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

// invalid is the problem of invalid input: 413 for input over its size
// bound, 422 naming the field at fault (service.InvalidError, or an error
// of the store or the outbox the service types as one); nil for any other
// error.
func invalid(err error) *Problem {
	err = service.Typed(err)
	var tooLarge *service.TooLargeError
	var bad *service.InvalidError
	switch {
	case errors.As(err, &tooLarge):
		return &Problem{Status: http.StatusRequestEntityTooLarge, Detail: tooLarge.Detail, Fields: service.Fields(tooLarge)}
	case errors.As(err, &bad):
		return &Problem{Status: http.StatusUnprocessableEntity, Detail: bad.Detail, Fields: service.Fields(bad)}
	}
	return nil
}

// answer writes v as JSON with status (no body for 204), or err's problem.
func (s *Server) answer(c *gin.Context, status int, v any, err error) {
	switch {
	case err != nil:
		s.fail(c, err)
	case status == http.StatusNoContent:
		c.Status(status)
	default:
		c.JSON(status, v)
	}
}

// fail maps an error to its problem by its service type: 413 and 422 for
// invalid input (naming the field), 403, 404, 409, 410, 503 with
// Retry-After, else 500 (logged, no detail leaked). It is the one place
// errors become HTTP answers.
func (s *Server) fail(c *gin.Context, err error) {
	if p := invalid(err); p != nil {
		problem(c, p.Status, p.Detail, p.Fields...)
		return
	}
	err = service.Typed(err)
	var (
		notFound    *service.NotFoundError
		forbidden   *service.ForbiddenError
		conflict    *service.ConflictError
		gone        *service.GoneError
		unavailable *service.UnavailableError
	)
	switch {
	case errors.As(err, &notFound):
		problem(c, http.StatusNotFound, notFound.Detail)
	case errors.As(err, &forbidden):
		problem(c, http.StatusForbidden, forbidden.Detail, service.Fields(forbidden)...)
	case errors.As(err, &conflict):
		problem(c, http.StatusConflict, conflict.Detail, service.Fields(conflict)...)
	case errors.As(err, &gone):
		problem(c, http.StatusGone, gone.Detail)
	case errors.As(err, &unavailable):
		c.Header("Retry-After", strconv.Itoa(int(unavailable.RetryAfter/time.Second)))
		problem(c, http.StatusServiceUnavailable, unavailable.Detail)
	default:
		s.logger.Error("request failed", "method", c.Request.Method, "route", c.FullPath(), "err", err)
		problem(c, http.StatusInternalServerError, "internal error")
	}
}

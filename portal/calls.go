package portal

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/service"
)

// pageError is a problem a page shows: the service's words (escaped by
// the templates) for what the user can fix, with the fields at fault.
type pageError struct {
	Status int
	Detail string
	Fields []string
}

func (e *pageError) Error() string { return e.Detail }

// invalidPage is the pageError of a *service.InvalidError, nil for any
// other error.
func invalidPage(err error) *pageError {
	var bad *service.InvalidError
	if !errors.As(err, &bad) {
		return nil
	}
	return &pageError{Status: http.StatusUnprocessableEntity, Detail: bad.Detail, Fields: service.Fields(bad)}
}

// as is the session's principal, its app and the context of a service
// call made for the request: a call is not canceled when the browser goes
// away, so a change it began is finished and audited.
func as(c *gin.Context) (context.Context, access.Principal, string) {
	sess := sessionOf(c)
	return context.WithoutCancel(c.Request.Context()), sess.Principal(), sess.AppID
}

// failed answers a service error as a page: the service's own words
// (escaped) for what the user can fix, a plain message for the rest.
func (p *Portal) failed(c *gin.Context, err error) {
	var (
		notFound    *service.NotFoundError
		forbidden   *service.ForbiddenError
		unavailable *service.UnavailableError
		conflict    *service.ConflictError
		gone        *service.GoneError
		tooLarge    *service.TooLargeError
	)
	switch {
	case errors.As(err, &notFound):
		p.plain(c, http.StatusNotFound, msgNoSuchPage)
	case errors.As(err, &gone):
		p.showError(c, &pageError{Status: http.StatusGone, Detail: gone.Detail})
	case errors.As(err, &forbidden):
		p.plain(c, http.StatusForbidden, msgNotAllowed)
	case errors.As(err, &unavailable):
		p.plain(c, http.StatusServiceUnavailable, "The service is unavailable right now. Try again shortly.")
	case invalidPage(err) != nil:
		p.showError(c, invalidPage(err))
	case errors.As(err, &conflict):
		p.showError(c, &pageError{Status: http.StatusConflict, Detail: conflict.Detail, Fields: service.Fields(conflict)})
	case errors.As(err, &tooLarge):
		p.showError(c, &pageError{Status: http.StatusRequestEntityTooLarge, Detail: tooLarge.Detail, Fields: service.Fields(tooLarge)})
	default:
		p.logger.Error("portal call", "route", c.FullPath(), "err", err)
		p.plain(c, http.StatusInternalServerError, "The service is unavailable right now. Try again shortly.")
	}
}

// showError renders the error page with pe, and stops.
func (p *Portal) showError(c *gin.Context, pe *pageError) {
	p.render(c, pe.Status, "error", map[string]any{"Error": pe})
	c.Abort()
}

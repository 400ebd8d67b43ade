package portal

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
)

// APIError is the API's problem answer to a call the portal made.
type APIError struct {
	Status int
	Detail string
	Fields []string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Detail) }

// call makes an API call in-process as the session's principal, under the
// session's app ("/v1/apps/{app}" + path), decoding a 2xx answer into out.
func (p *Portal) call(c *gin.Context, method, path string, body any, out any) error {
	sess := sessionOf(c)
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx := access.NewContext(context.WithoutCancel(c.Request.Context()), sess.Principal())
	req, err := http.NewRequestWithContext(ctx, method, "/v1/apps/"+url.PathEscape(sess.AppID)+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.RemoteAddr = c.Request.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	ans := &answer{header: http.Header{}, code: http.StatusOK}
	p.opts.API.ServeHTTP(ans, req)
	if ans.code >= 400 {
		var prob struct {
			Detail string   `json:"detail"`
			Fields []string `json:"fields"`
		}
		_ = json.Unmarshal(ans.body.Bytes(), &prob)
		return &APIError{Status: ans.code, Detail: cmp.Or(prob.Detail, http.StatusText(ans.code)), Fields: prob.Fields}
	}
	if out != nil && ans.body.Len() > 0 {
		if err := json.Unmarshal(ans.body.Bytes(), out); err != nil {
			return fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

// answer holds what the API answered an in-process call (an
// http.ResponseWriter).
type answer struct {
	header http.Header
	code   int
	body   bytes.Buffer
	wrote  bool
}

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(code int) {
	if !a.wrote {
		a.code, a.wrote = code, true
	}
}

func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}

// failed answers an API error as a page: the API's own words (escaped) for
// what the user can fix, a plain message for the rest.
func (p *Portal) failed(c *gin.Context, err error) {
	var ae *APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Status == http.StatusNotFound:
			p.plain(c, http.StatusNotFound, msgNoSuchPage)
		case ae.Status >= 500:
			p.plain(c, ae.Status, "The service is unavailable right now. Try again shortly.")
		default:
			p.render(c, ae.Status, "error", map[string]any{"Error": ae})
			c.Abort()
		}
		return
	}
	p.logger.Error("portal call", "route", c.FullPath(), "err", err)
	p.plain(c, http.StatusInternalServerError, "Something went wrong. Try again.")
}

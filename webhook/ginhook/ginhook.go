// Package ginhook adapts webhook.Middleware to gin.
package ginhook

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/webhook"
)

// Verify returns gin middleware that verifies each request with v; the
// verified event is available to later handlers through Event.
func Verify(v *webhook.Verifier, opts webhook.Options) gin.HandlerFunc {
	return func(c *gin.Context) {
		passed := false
		webhook.Middleware(v, opts, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			passed = true
			c.Request = r
		})).ServeHTTP(c.Writer, c.Request)
		if !passed {
			c.Abort()
			return
		}
		c.Next()
	}
}

// Event returns the verified event of the request.
func Event(c *gin.Context) (webhook.Event, bool) {
	return webhook.FromContext(c.Request.Context())
}

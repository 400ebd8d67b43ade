package activities

import (
	"context"
	"time"
)

// ShareWaiting is how many attempts wait for a place in endpointID's share.
func ShareWaiting(s *Shares, endpointID string) int { return s.places().Waiting(endpointID) }

// SendWaiting makes req as a workflow's asynchronous attempt does: a full
// share or an open breaker is waited for until by.
func SendWaiting(ctx context.Context, a *Activities, req SendRequest, by time.Time) (SendResult, error) {
	return a.send(ctx, req, 0, by)
}

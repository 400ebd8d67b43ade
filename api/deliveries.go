package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/delivery"
	"hookrelay/ids"
	"hookrelay/store"
)

func (s *Server) listDeliveries(c *gin.Context) {
	p, since, until, ok := rangeQuery(c)
	if !ok {
		return
	}
	f := store.DeliveryFilter{Status: delivery.Status(c.Query("status")), EndpointIDs: c.QueryArray("endpoint_id"), EventID: c.Query("event_id"),
		EventType: c.Query("event_type"), Since: since, Until: until}
	if f.Status != "" && !slices.Contains(delivery.Statuses(), f.Status) {
		problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("status must be one of %v", delivery.Statuses()), "status")
		return
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	ds, err := s.store.ListDeliveries(c.Request.Context(), c.Param("app"), f, p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, ds, func(d store.Delivery) string { return d.ID })
}

func (s *Server) getDelivery(c *gin.Context) {
	ctx := c.Request.Context()
	d, err := s.store.GetDelivery(ctx, c.Param("app"), c.Param("dlv"))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if keep, ok := s.pruned(ctx, c.Param("app"), c.Param("dlv")); ok {
				problem(c, http.StatusGone, fmt.Sprintf("delivery %s was made more than %s ago and has been pruned (the app's retention, else HOOKRELAY_RETENTION)", c.Param("dlv"), keep))
				return
			}
		}
		s.fail(c, err)
		return
	}
	// When is the next attempt: Postgres has it from the last attempt's
	// record; a running workflow refines it when it answers in time.
	if s.engine != nil && d.Status.InFlight() {
		qctx, cancel := context.WithTimeout(ctx, EngineQueryTimeout)
		defer cancel()
		if at, err := s.engine.NextAttemptAt(qctx, d.ID); err == nil {
			d.NextAttemptAt = at
		}
	}
	c.JSON(http.StatusOK, d)
}

// pruned reports whether a delivery ID of appID not found is older than
// the retention that applies to it (the app's, else the server's), so it
// was pruned rather than never there; keep is that retention.
func (s *Server) pruned(ctx context.Context, appID, id string) (keep time.Duration, ok bool) {
	made, ok := ids.Time(id)
	if !ok {
		return 0, false
	}
	keep = s.retention
	if a, err := s.store.GetApp(ctx, appID); err == nil && a.Retention > 0 {
		keep = a.Retention
	}
	return keep, keep > 0 && time.Since(made) > keep
}

func (s *Server) listAttempts(c *gin.Context) {
	ctx := c.Request.Context()
	if _, err := s.store.GetDelivery(ctx, c.Param("app"), c.Param("dlv")); err != nil {
		s.fail(c, err)
		return
	}
	atts, err := s.store.ListAttempts(ctx, c.Param("app"), c.Param("dlv"), 0)
	if err != nil {
		s.fail(c, err)
		return
	}
	if atts == nil {
		atts = []store.Attempt{}
	}
	c.JSON(http.StatusOK, gin.H{"data": atts})
}

func (s *Server) replayDelivery(c *gin.Context) {
	ctx := c.Request.Context()
	d, err := s.store.GetDelivery(ctx, c.Param("app"), c.Param("dlv"))
	if err != nil {
		s.fail(c, err)
		return
	}
	by := principal(c)
	queued, err := store.ReplayDeliveries(ctx, s.store.Pool(), c.Param("app"), []string{d.ID}, by.ID, by.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	if len(queued) == 0 {
		if !s.endpointEnabled(c, d.EndpointID) {
			return
		}
		problem(c, http.StatusConflict, fmt.Sprintf("delivery %s is %s; only finished (succeeded, dead-lettered or canceled) deliveries can be replayed", d.ID, d.Status), "status")
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"replayed": 1})
}

// endpointEnabled answers 409 (or 404) and reports false unless the
// endpoint exists and is enabled: a dead letter of a disabled endpoint
// stays a dead letter until the endpoint is enabled again.
// An endpoint named by the path and not found is a 404.
func (s *Server) endpointEnabled(c *gin.Context, endpointID string) bool {
	e, err := s.store.GetEndpoint(c.Request.Context(), c.Param("app"), endpointID)
	switch {
	case errors.Is(err, store.ErrNotFound) && c.Param("ep") == "":
		problem(c, http.StatusConflict, fmt.Sprintf("endpoint %s was deleted; its deliveries cannot be replayed", endpointID), "endpoint_id")
		return false
	case err != nil:
		s.fail(c, err)
		return false
	case e.Disabled:
		problem(c, http.StatusConflict, fmt.Sprintf("endpoint %s is disabled; enable it to replay its deliveries", endpointID), "endpoint_id")
		return false
	}
	return true
}

type rangeRequest struct {
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
	// DryRun counts the dead letters the range would replay and replays
	// nothing.
	DryRun bool `json:"dry_run"`
}

func (s *Server) replayEndpoint(c *gin.Context) {
	var req rangeRequest
	if !bind(c, &req) {
		return
	}
	if req.Since == nil {
		problem(c, http.StatusUnprocessableEntity, "since is required (RFC 3339)", "since")
		return
	}
	until := time.Now()
	if req.Until != nil {
		until = *req.Until
	}
	if !until.After(*req.Since) {
		problem(c, http.StatusUnprocessableEntity, "until must be after since", "until")
		return
	}
	ctx := c.Request.Context()
	if _, err := s.store.GetEndpoint(ctx, c.Param("app"), c.Param("ep")); err != nil {
		s.fail(c, err)
		return
	}
	if !s.endpointEnabled(c, c.Param("ep")) {
		return
	}
	dead, err := s.store.DeadLettered(ctx, c.Param("app"), c.Param("ep"), *req.Since, until)
	if err != nil {
		s.fail(c, err)
		return
	}
	if req.DryRun {
		c.JSON(http.StatusOK, gin.H{"would_replay": len(dead)})
		return
	}
	by := principal(c)
	queued, err := store.ReplayDeliveries(ctx, s.store.Pool(), c.Param("app"), dead, by.ID, by.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"replayed": len(queued)})
}

func (s *Server) stats(c *gin.Context) {
	n := StatsLastDefault
	if v := c.Query("last"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > MaxStatsLast {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("last must be an integer from 1 to %d", MaxStatsLast), "last")
			return
		}
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	st, err := s.store.Stats(c.Request.Context(), c.Param("app"), n, c.QueryArray("endpoint_id"), time.Now())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

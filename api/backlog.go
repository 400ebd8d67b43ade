package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/store"
)

// Load shedding counts per app.
const (
	// backlogInterval is how often WatchBacklog counts the outbox rows of
	// each app that ingested lately.
	backlogInterval = 250 * time.Millisecond
	// backlogMaxAge is how old a count may be before ingest counts again
	// itself (when WatchBacklog is not running or fell behind).
	backlogMaxAge = 4 * backlogInterval
	// backlogIdle is how long an app may not ingest before WatchBacklog
	// stops counting its rows.
	backlogIdle = 10 * time.Second
	// ShedRetryAfter is the Retry-After of an ingest shed for its app's
	// backlog.
	ShedRetryAfter = time.Second
)

// backlogs holds each active app's outbox backlog: the rows counted in
// Postgres (up to the bound) plus those this process added since.
type backlogs struct {
	st    *store.Store
	limit int
	mu    sync.Mutex
	apps  map[string]*backlog
}

type backlog struct {
	rows     int64
	counted  time.Time
	seen     time.Time
	counting bool
}

func newBacklogs(st *store.Store, limit int) *backlogs {
	return &backlogs{st: st, limit: limit, apps: map[string]*backlog{}}
}

// over reports whether app's backlog is past the bound, counting its rows
// first when the last count is older than backlogMaxAge. Only one request
// of an app counts at a time; the others use the last count.
func (b *backlogs) over(ctx context.Context, appID string, now time.Time) (bool, error) {
	if b.limit <= 0 {
		return false, nil
	}
	b.mu.Lock()
	e := b.entry(appID, now)
	stale := !e.counting && now.Sub(e.counted) > backlogMaxAge
	e.counting = e.counting || stale
	b.mu.Unlock()
	if stale {
		counts, err := b.st.AppBacklogs(ctx, []string{appID}, b.limit+1)
		b.store(counts, now, err == nil)
		if err != nil {
			return false, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entry(appID, now).rows > int64(b.limit), nil
}

// entry is app's record, made on first use; b.mu is held.
func (b *backlogs) entry(appID string, now time.Time) *backlog {
	e, ok := b.apps[appID]
	if !ok {
		if len(b.apps) >= maxTrackedClients {
			b.apps = map[string]*backlog{}
		}
		e = &backlog{}
		b.apps[appID] = e
	}
	e.seen = now
	return e
}

// added counts n rows an accepted event added to app's backlog.
func (b *backlogs) added(appID string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.apps[appID]; ok {
		e.rows += int64(n)
	}
}

// store records counts made at now (ok false: the count failed, so only
// the counting marks are cleared).
func (b *backlogs) store(counts map[string]int64, now time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, n := range counts {
		if e, found := b.apps[id]; found {
			e.rows, e.counted, e.counting = n, now, false
		}
	}
	if !ok {
		for _, e := range b.apps {
			e.counting = false
		}
	}
}

// active lists the apps that ingested within backlogIdle, forgetting the
// others.
func (b *backlogs) active(now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.apps, func(_ string, e *backlog) bool { return now.Sub(e.seen) > backlogIdle })
	return slices.Collect(maps.Keys(b.apps))
}

// WatchBacklog counts, every backlogInterval until ctx ends, the outbox
// rows of each app that ingested lately, up to the bound (past it the
// exact size does not matter), all in one statement; ingest sheds with
// 429 + Retry-After while its own app is past MaxBacklog, so a stalled
// dispatcher never hides behind fast 2xx answers and one app's backlog
// never refuses another's events.
func (s *Server) WatchBacklog(ctx context.Context) {
	b := s.backlogs
	if b.limit <= 0 {
		return
	}
	t := time.NewTicker(backlogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if ids := b.active(now); len(ids) > 0 {
			counts, err := b.st.AppBacklogs(ctx, ids, b.limit+1)
			if err != nil {
				s.logger.Debug("counting backlogs failed", "err", err)
			}
			b.store(counts, now, err == nil)
		}
	}
}

// shed answers 429 when the app's outbox backlog is past its bound. A
// failed count sheds nothing (ingest itself will meet the same database).
func (s *Server) shed(c *gin.Context) bool {
	now := time.Now()
	over, err := s.backlogs.over(c.Request.Context(), c.Param("app"), now)
	if err != nil {
		s.logger.Debug("counting backlog failed", "app", c.Param("app"), "err", err)
	}
	if !over {
		return false
	}
	c.Header("Retry-After", retryAfter(now.Add(ShedRetryAfter), now))
	problem(c, http.StatusTooManyRequests, fmt.Sprintf("this app's delivery backlog is over %d deliveries; retry shortly (nothing already accepted is affected, nor any other app)", s.backlogs.limit))
	return true
}

// shedKey refuses (429) an event whose ordering key's own backlog (its open
// deliveries, waiting behind their sequences' heads) is past the app's
// bound: the rows of keyed sequences are not the app's backlog, so a
// blocked or slow key is refused on its own and the app's other events
// still go.
func (s *Server) shedKey(c *gin.Context, appID, key string) bool {
	if key == "" || s.backlogs.limit <= 0 {
		return false
	}
	n, err := s.backlogs.st.KeyBacklog(c.Request.Context(), appID, key)
	if err != nil {
		s.logger.Debug("counting a key's backlog failed", "app", appID, "err", err)
		return false
	}
	if n <= int64(s.backlogs.limit) {
		return false
	}
	now := time.Now()
	c.Header("Retry-After", retryAfter(now.Add(ShedRetryAfter), now))
	problem(c, http.StatusTooManyRequests, fmt.Sprintf("this ordering key's backlog is over %d deliveries (its sequence waits for its oldest delivery); retry later, or publish with another key (nothing already accepted is affected, nor any other key)", s.backlogs.limit), "ordering_key")
	return true
}

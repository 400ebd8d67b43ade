package outbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"hookrelay/filter"
)

// maxPublisherApps bounds the apps a Publisher remembers; past it, it
// starts again empty (an app it forgot costs one more statement).
const maxPublisherApps = 10_000

// maxStaleRounds bounds how often one publish re-reads filters that
// changed under it before it gives up.
const maxStaleRounds = 3

// Publisher publishes events (Publish, PublishNow) and keeps, between
// calls, each app's filtered endpoints and their compiled programs, so an
// event costs one statement. What it keeps is only a guess: the statement
// checks it against the endpoints it reads and, when a filter was added
// or changed, writes nothing and the Publisher reads the app's filters
// again. Safe for concurrent use.
type Publisher struct {
	// filters is built on first use: an app without filters never needs it.
	filters func() (*filter.Filters, error)
	mu      sync.Mutex
	// apps are the filtered endpoints last read of each app.
	apps map[string][]endpointFilter
	// errs counts filter errors (WithFilterErrors); nil counts nothing.
	errs FilterErrorCounter
}

// FilterErrorCounter counts the events an endpoint's filter failed to
// evaluate on (hookrelay's *metrics.Sender is one:
// hookrelay_filter_errors_total).
type FilterErrorCounter interface {
	FilterError(endpointID string)
}

// WithFilterErrors makes p count each filter error of the events it
// publishes with c (a repeat of a published event counts nothing), and
// returns p. Set it before p publishes. The API's ingest counts through
// it; a producer that publishes in its own transaction passes its own
// counter to count the same.
func (p *Publisher) WithFilterErrors(c FilterErrorCounter) *Publisher {
	p.errs = c
	return p
}

// endpointFilter is one enabled endpoint's filter and the event types it
// subscribes to (none: every type).
type endpointFilter struct {
	id, expr string
	types    []string
}

// subscribes reports whether f's endpoint subscribes to events of typ.
func (f endpointFilter) subscribes(typ string) bool {
	return len(f.types) == 0 || slices.Contains(f.types, typ)
}

// NewPublisher returns a Publisher that remembers nothing yet.
func NewPublisher() *Publisher {
	return &Publisher{filters: sync.OnceValues(filter.New), apps: map[string][]endpointFilter{}}
}

// Filters are the Publisher's compiled programs (the API checks filters
// with the same cache).
func (p *Publisher) Filters() (*filter.Filters, error) { return p.filters() }

// Publish is the package's Publish, with the Publisher's memory.
func (p *Publisher) Publish(ctx context.Context, tx Querier, appID string, ev Event) (Published, error) {
	return p.publish(ctx, tx, appID, ev, nil)
}

// PublishNow is the package's PublishNow, with the Publisher's memory.
func (p *Publisher) PublishNow(ctx context.Context, q Querier, appID string, ev Event) (Published, error) {
	return p.publish(ctx, q, appID, ev, nil)
}

func (p *Publisher) known(appID string) []endpointFilter {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.apps[appID]
}

// reload reads appID's filtered endpoints.
func (p *Publisher) reload(ctx context.Context, q Querier, appID string) ([]endpointFilter, error) {
	rows, err := q.Query(ctx, `SELECT id, filter, event_types FROM endpoints WHERE app_id = $1 AND filter <> '' AND NOT disabled AND deleted_at IS NULL`, appID)
	if err != nil {
		return nil, fmt.Errorf("load filters of %s: %w", appID, err)
	}
	defer rows.Close()
	var out []endpointFilter
	for rows.Next() {
		var f endpointFilter
		if err := rows.Scan(&f.id, &f.expr, &f.types); err != nil {
			return nil, fmt.Errorf("load filters of %s: %w", appID, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load filters of %s: %w", appID, err)
	}
	p.mu.Lock()
	if len(p.apps) >= maxPublisherApps {
		clear(p.apps)
	}
	p.apps[appID] = out
	p.mu.Unlock()
	return out, nil
}

// verdicts evaluates each filter on ev, as the statement's parameters.
func (p *Publisher) verdicts(fs []endpointFilter, ev Event, created time.Time) (verdicts, error) {
	var v verdicts
	if len(fs) == 0 || ev.Endpoint != "" {
		return v, nil
	}
	filters, err := p.filters()
	if err != nil {
		return v, err
	}
	var in *filter.Input
	for _, f := range fs {
		var r filter.Result
		evaluated := f.subscribes(ev.Type)
		if evaluated {
			// The payload is decoded once, for the first filter that runs.
			if in == nil {
				if in, err = filter.NewInput(filter.Event{Type: ev.Type, Data: ev.Data, Created: created, APIVersion: ev.APIVersion}); err != nil {
					return v, err
				}
			}
			r = filters.Eval(f.expr, in)
		}
		v.ids, v.exprs, v.matched, v.errs = append(v.ids, f.id), append(v.exprs, f.expr), append(v.matched, r.Matched), append(v.errs, r.Err)
		v.evaluated = append(v.evaluated, evaluated)
	}
	return v, nil
}

// verdicts are filters' results on one event, one entry per endpoint; an
// endpoint not subscribed to the event's type (as last read) has its filter
// not evaluated, and the statement checks that it still is not.
type verdicts struct {
	ids, exprs []string
	matched    []bool
	errs       []string
	evaluated  []bool
}

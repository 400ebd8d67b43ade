package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"hookrelay/delivery"
)

// Handoff asks a publish to lease its start rows whose first attempts are
// due at once (the earliest first wait, less its jitter, no longer than
// ClaimGuard) to a sender in the publishing process, in the statement that
// writes them: the sender takes them from the Published, with no
// dispatcher round, NOTIFY or claim between the commit and the request.
// A leased row is left alone by the dispatchers until its lease lapses, so
// a process that dies after the commit loses nothing: its rows are claimed
// again then, as a round's are. Rows of ordered deliveries, of paused
// endpoints and of the endpoints in Skip are not leased to the sender:
// those of an endpoint held until a later time (Until) wait in the outbox,
// leased until then, the others go to the dispatchers' rounds.
type Handoff struct {
	// Lease is how long past its request timeout a leased row's lease
	// lasts, counted from the publish; it must cover the first attempt's
	// due time, its wait for a share and its recording.
	Lease time.Duration
	// Skip are endpoints whose attempts the sender's breaker holds.
	Skip []string
	// Until, one per Skip (none: all zero), is until when each holds a new
	// delivery's attempt: the end of its cool-down, or of the probe out;
	// zero when a probe may go now. A row of an endpoint held past the
	// publish is written leased until then, spread later by up to two
	// tenths of the time left (as delivery.HeldWait), the spread ending
	// delivery.HeldLead before its last start at the latest, the lease
	// never past it (as delivery.HeldEnd; an ordered delivery's, or a paused
	// endpoint's, is not held): its
	// first attempt costs no NOTIFY, round or hold before the probe, and
	// its delivery keeps its deadline. The others go to the rounds.
	Until []time.Time
}

// holdMS is how long from now each endpoint of Skip holds a new
// delivery's attempt, in milliseconds rounded up (a lease never ends
// before the probe; 0: not held), as the publish
// statement takes it: measured on this process's clock, it holds for as
// long whatever the database's clock says.
func (h Handoff) holdMS(now time.Time) []int64 {
	if len(h.Until) == 0 {
		return nil
	}
	out := make([]int64, len(h.Until))
	for i, u := range h.Until {
		if !u.IsZero() {
			out[i] = max((u.Sub(now) + time.Millisecond - 1).Milliseconds(), 0)
		}
	}
	return out
}

// Leased is a start row a publish leased to its process's sender (see
// Handoff).
type Leased struct {
	Row
	// Until is when the row's lease lapses.
	Until time.Time
	// Held is true for a row leased until its endpoint's probe (see
	// Handoff.Until), not to the sender.
	Held bool
}

// leasedRow is a leased row as the publish statement returns it.
type leasedRow struct {
	ID         int64   `json:"id"`
	DeliveryID string  `json:"delivery"`
	EndpointID string  `json:"endpoint"`
	URL        string  `json:"url"`
	Schedule   []int64 `json:"schedule"`
	DeadlineMS int64   `json:"deadline"`
	TimeoutMS  int64   `json:"timeout"`
	// CreatedUS and UntilUS are Unix microseconds.
	CreatedUS int64  `json:"created"`
	UntilUS   int64  `json:"until"`
	AppName   string `json:"app"`
	Held      bool   `json:"held"`
}

// leased decodes the publish statement's leased rows (JSON, nil when it
// leased none) of event ev, published for appID in the trace context tp/ts.
func leased(raw []byte, appID string, ev Event, tp, ts string) ([]Leased, error) {
	if raw == nil {
		return nil, nil
	}
	var rows []leasedRow
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("decode leased rows: %w", err)
	}
	out := make([]Leased, len(rows))
	for i, r := range rows {
		out[i] = Leased{Until: time.UnixMicro(r.UntilUS), Held: r.Held, Row: Row{
			ID: r.ID, Kind: KindStart, CreatedAt: time.UnixMicro(r.CreatedUS), DeliveryID: r.DeliveryID,
			Exists: true, Status: delivery.StatusPending, AppID: appID, EventID: ev.ID, EventType: ev.Type,
			EndpointID: r.EndpointID, EndpointURL: r.URL, AppName: r.AppName, Cycle: 1,
			Settings:    delivery.StoredSettings(r.Schedule, r.DeadlineMS, r.TimeoutMS),
			Traceparent: tp, Tracestate: ts,
		}}
	}
	return out, nil
}

// PublishHandoff is PublishNow that leases the rows due at once to the
// process's sender (see Handoff); the Published's Leased are its rows.
func (p *Publisher) PublishHandoff(ctx context.Context, q Querier, appID string, ev Event, h Handoff) (Published, error) {
	return p.publish(ctx, q, appID, ev, &h)
}

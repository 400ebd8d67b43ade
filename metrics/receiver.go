package metrics

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"hookrelay/inbox"
	"hookrelay/webhook"
)

// Receiver holds the receiving kit's series: "every webhook got 2xx" and
// "the inbox is stuck" are two different series. A nil *Receiver records
// nothing.
type Receiver struct {
	verifications *prometheus.CounterVec
	accepted      *prometheus.CounterVec
	taskRuns      *prometheus.CounterVec
}

// NewReceiver registers the receiver kit's series on reg, and the inbox's
// task gauges read from pool at scrape time.
func NewReceiver(reg prometheus.Registerer, pool *pgxpool.Pool) *Receiver {
	r := &Receiver{
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "receiver_verifications_total",
			Help: "Webhooks verified or rejected, by outcome and reject reason."}, []string{"outcome", "reason"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "receiver_events_total",
			Help: "Verified events, by result: accepted (new) or duplicate (absorbed)."}, []string{"result"}),
		taskRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "inbox_task_runs_total",
			Help: "Inbox task runs, by result: completed or failed."}, []string{"result"}),
	}
	reg.MustRegister(r.verifications, r.accepted, r.taskRuns, &inboxState{pool: pool,
		tasks:  prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "inbox_tasks"), "Inbox tasks by state.", []string{"state"}, nil),
		oldest: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "inbox_oldest_pending_age_seconds"), "Age of the oldest task not yet done (0 when none).", nil, nil),
	})
	return r
}

// Verified counts a verified webhook.
func (r *Receiver) Verified() {
	if r != nil {
		r.verifications.WithLabelValues("verified", "").Inc()
	}
}

// Rejected counts a rejected webhook by its typed reason.
func (r *Receiver) Rejected(err error) {
	if r != nil {
		r.verifications.WithLabelValues("rejected", RejectReason(err)).Inc()
	}
}

// Event counts a verified event: accepted (new) or a duplicate.
func (r *Receiver) Event(duplicate bool) {
	if r == nil {
		return
	}
	if duplicate {
		r.accepted.WithLabelValues("duplicate").Inc()
		return
	}
	r.accepted.WithLabelValues("accepted").Inc()
}

// TaskRun counts an inbox task run.
func (r *Receiver) TaskRun(err error) {
	if r == nil {
		return
	}
	if err != nil {
		r.taskRuns.WithLabelValues("failed").Inc()
		return
	}
	r.taskRuns.WithLabelValues("completed").Inc()
}

// RejectReason is a bounded label for a verification error.
func RejectReason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{webhook.ErrMissingHeader, "missing_header"}, {webhook.ErrMalformed, "malformed"}, {webhook.ErrStale, "stale"},
		{webhook.ErrFuture, "future"}, {webhook.ErrNoMatch, "no_match"}, {webhook.ErrNoKeys, "no_keys"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

type inboxState struct {
	pool   *pgxpool.Pool
	tasks  *prometheus.Desc
	oldest *prometheus.Desc
}

func (s *inboxState) Describe(ch chan<- *prometheus.Desc) { ch <- s.tasks; ch <- s.oldest }

func (s *inboxState) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateQueryTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM webhook_inbox_tasks GROUP BY status`)
	if err != nil {
		return
	}
	counts := map[string]float64{inbox.StatusPending: 0, inbox.StatusProcessing: 0, inbox.StatusCompleted: 0, inbox.StatusDead: 0}
	for rows.Next() {
		var st string
		var n float64
		if rows.Scan(&st, &n) == nil {
			counts[st] = n
		}
	}
	rows.Close()
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(s.tasks, prometheus.GaugeValue, n, st)
	}
	var age float64
	if _, oldest, err := inbox.Backlog(ctx, s.pool); err == nil {
		age = oldest.Seconds()
		ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, age)
	}
}

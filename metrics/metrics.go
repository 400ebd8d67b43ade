// Package metrics holds hookrelay's Prometheus series, each defined once:
// the sender's (ingest, attempts, deliveries, dispatcher, and gauges read
// from Postgres at scrape time) and the receiver kit's (verifications, the
// inbox). Every process builds its own registry; nothing is global.
package metrics

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every series.
const Namespace = "hookrelay"

// Ingest outcomes.
const (
	IngestAccepted = "accepted"
	IngestRepeat   = "idempotent_repeat"
	IngestConflict = "conflict"
	IngestShed     = "shed"
	IngestInvalid  = "invalid"
)

// NewRegistry returns a registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Sender holds the sending side's series. A nil *Sender records nothing.
type Sender struct {
	ingested     *prometheus.CounterVec
	attempts     *prometheus.CounterVec
	finished     *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	byEndpoint   *prometheus.CounterVec // nil unless opted in
	filterErrors prometheus.Counter
	// filterByEndpoint is nil unless opted in.
	filterByEndpoint *prometheus.CounterVec
	attemptSeconds   prometheus.Histogram
	firstAttempt     prometheus.Histogram
	rounds           prometheus.Counter
	roundErrors      prometheus.Counter
	handoffs         prometheus.Counter
}

// NewSender registers the sender's series on reg. With endpointSeries it
// also counts attempts and filter errors per endpoint ID
// (hookrelay_endpoint_attempts_total, hookrelay_endpoint_filter_errors_total),
// a label as many-valued as the endpoints, so it is opt-in.
func NewSender(reg prometheus.Registerer, endpointSeries bool) *Sender {
	s := &Sender{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "events_ingested_total",
			Help: "Events offered to ingest, by outcome (accepted, idempotent_repeat, conflict, shed, invalid)."}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "attempts_total",
			Help: "Delivery attempts sent, by class and status code family (2xx…5xx, none)."}, []string{"class", "code"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "deliveries_finished_total",
			Help: "Delivery cycles that ended, by final status (succeeded, dead_lettered, canceled)."}, []string{"status"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "dead_lettered_total",
			Help: "Delivery cycles that ended dead-lettered, by the class of their last attempt (none when nothing was sent)."}, []string{"class"}),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "attempt_duration_seconds",
			Help: "Duration of one attempt's request.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		firstAttempt: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "first_attempt_latency_seconds",
			Help: "From an event's acceptance to the end of its delivery's first attempt.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "dispatcher_rounds_total",
			Help: "Outbox dispatcher rounds that claimed rows."}),
		roundErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "dispatcher_errors_total",
			Help: "Outbox dispatcher rounds that failed (retried with backoff)."}),
		handoffs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "dispatcher_handoffs_total",
			Help: "First attempts an ingest handed to its own process's sender, with no dispatcher round."}),
	}
	if endpointSeries {
		s.byEndpoint = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "endpoint_attempts_total",
			Help: "Delivery attempts sent, by endpoint ID and class (opt-in: one series per endpoint)."}, []string{"endpoint_id", "class"})
		// Only endpoints whose filter fails on an event have a series.
		s.filterByEndpoint = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "endpoint_filter_errors_total",
			Help: "Events an endpoint's payload filter failed to evaluate on, by endpoint ID (opt-in: one series per endpoint)."}, []string{"endpoint_id"})
		reg.MustRegister(s.byEndpoint, s.filterByEndpoint)
	}
	s.filterErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "filter_errors_total",
		Help: "Events an endpoint's payload filter failed to evaluate on (counted as no match for that endpoint)."})
	reg.MustRegister(s.filterErrors, s.ingested, s.attempts, s.finished, s.deadLettered, s.attemptSeconds, s.firstAttempt, s.rounds, s.roundErrors, s.handoffs)
	return s
}

// Ingested counts one ingest outcome.
func (s *Sender) Ingested(outcome string) {
	if s != nil {
		s.ingested.WithLabelValues(outcome).Inc()
	}
}

// FilterError counts an event endpointID's filter failed to evaluate on.
func (s *Sender) FilterError(endpointID string) {
	if s == nil {
		return
	}
	s.filterErrors.Inc()
	if s.filterByEndpoint != nil {
		s.filterByEndpoint.WithLabelValues(endpointID).Inc()
	}
}

// Attempt records one sent attempt to endpointID; first is set for a delivery's first
// attempt, accepted the event's acceptance.
func (s *Sender) Attempt(endpointID, class string, code int, took time.Duration, first bool, accepted time.Time) {
	if s == nil {
		return
	}
	s.attempts.WithLabelValues(class, CodeFamily(code)).Inc()
	if s.byEndpoint != nil {
		s.byEndpoint.WithLabelValues(endpointID, class).Inc()
	}
	s.attemptSeconds.Observe(took.Seconds())
	if first && !accepted.IsZero() {
		s.firstAttempt.Observe(time.Since(accepted).Seconds())
	}
}

// Finished counts a delivery cycle that ended with status.
func (s *Sender) Finished(status string) {
	if s != nil {
		s.finished.WithLabelValues(status).Inc()
	}
}

// DeadLettered counts a cycle that ended dead-lettered, by the class of its
// last attempt ("" when nothing was sent).
func (s *Sender) DeadLettered(lastClass string) {
	if s != nil {
		s.deadLettered.WithLabelValues(cmp.Or(lastClass, "none")).Inc()
	}
}

// Round counts a dispatcher round that claimed rows, failed or not.
func (s *Sender) Round(err error) {
	if s == nil {
		return
	}
	s.rounds.Inc()
	if err != nil {
		s.roundErrors.Inc()
	}
}

// Handoffs counts n first attempts an ingest handed to the sender.
func (s *Sender) Handoffs(n int) {
	if s != nil {
		s.handoffs.Add(float64(n))
	}
}

// CodeFamily is a status code's family label: "2xx" … "5xx", or "none"
// when no response arrived.
func CodeFamily(code int) string {
	if code < 100 || code > 599 {
		return "none"
	}
	return strconv.Itoa(code/100) + "xx"
}

// Gauges are the figures /metrics reads from Postgres at scrape time
// (store.Store.Gauges), so every process reports what the database holds.
type Gauges struct {
	// OutboxBacklog counts outbox rows; OutboxOldestSeconds is the age of
	// the oldest (0 when empty).
	OutboxBacklog       int64
	OutboxOldestSeconds float64
	// WaitingRetry counts deliveries waiting for their next attempt.
	WaitingRetry int64
	// DeadLetters counts deliveries dead-lettered now.
	DeadLetters int64
	// EndpointsDisabled counts endpoints disabled now (not deleted).
	EndpointsDisabled int64
}

// stateQueryTimeout bounds the scrape-time reads of Postgres.
const stateQueryTimeout = 2 * time.Second

// state reads gauges from Postgres at scrape time, so every process reports
// the same figures as the database.
type state struct {
	read                                                    func(context.Context) (Gauges, error)
	backlog, oldest, waiting, dead, disabled, scrapeFailure *prometheus.Desc
}

// NewState registers the gauges read from Postgres at scrape time: outbox
// backlog and the age of its oldest row, deliveries waiting for a retry,
// dead letters, disabled endpoints.
// read is the store's reading of them (store.Store.Gauges).
//
// The receiver kit uses this package too: it imports nothing of the
// sender's (the store reads Gauges, not the other way round).
func NewState(reg prometheus.Registerer, read func(context.Context) (Gauges, error)) {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, nil, nil)
	}
	reg.MustRegister(&state{read: read,
		backlog:       d("outbox_backlog", "Outbox rows not yet carried to Temporal."),
		oldest:        d("outbox_oldest_age_seconds", "Age of the oldest outbox row (0 when empty)."),
		waiting:       d("deliveries_waiting_retry", "Deliveries waiting for their next attempt."),
		dead:          d("dead_letters", "Deliveries dead-lettered now."),
		disabled:      d("endpoints_disabled", "Endpoints disabled now (410, by hand)."),
		scrapeFailure: d("state_scrape_failed", "1 when the last read of these gauges from Postgres failed."),
	})
}

func (s *state) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.backlog, s.oldest, s.waiting, s.dead, s.disabled, s.scrapeFailure} {
		ch <- d
	}
}

func (s *state) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateQueryTimeout)
	defer cancel()
	g, err := s.read(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	} else {
		ch <- prometheus.MustNewConstMetric(s.backlog, prometheus.GaugeValue, float64(g.OutboxBacklog))
		ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, g.OutboxOldestSeconds)
		ch <- prometheus.MustNewConstMetric(s.waiting, prometheus.GaugeValue, float64(g.WaitingRetry))
		ch <- prometheus.MustNewConstMetric(s.dead, prometheus.GaugeValue, float64(g.DeadLetters))
		ch <- prometheus.MustNewConstMetric(s.disabled, prometheus.GaugeValue, float64(g.EndpointsDisabled))
	}
	ch <- prometheus.MustNewConstMetric(s.scrapeFailure, prometheus.GaugeValue, failed)
}

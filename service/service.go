// Package service is hookrelay's business layer: plain Go methods that take
// the principal a call acts as and typed inputs, and return typed results
// and typed errors (errors.go). Validation, authorization (a principal's
// reach over an app, a portal session's capabilities and endpoint limit),
// audit writes and the store calls happen here, once; the REST API (api)
// and the subscriber portal (portal) are thin adapters over it.
package service

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"hookrelay/access"
	"hookrelay/outbox"
	"hookrelay/store"
)

// Engine is what the service asks of the delivery engine (Temporal):
// nothing else of it is reached from a call.
type Engine interface {
	// Healthy reports whether the engine answers.
	Healthy(ctx context.Context) error
	// NextAttemptAt asks a delivery's running workflow when its next
	// attempt is due (nil: none is scheduled now).
	NextAttemptAt(ctx context.Context, deliveryID string) (*time.Time, error)
}

// EngineQueryTimeout bounds how long a read waits for the engine's
// refinement of a figure Postgres already answers.
const EngineQueryTimeout = 2 * time.Second

// auditTimeout bounds the audit write of a call that succeeded.
const auditTimeout = 5 * time.Second

// Options configures a Service.
type Options struct {
	// Store is the database.
	Store *store.Store
	// Engine answers next-attempt queries; nil leaves Postgres's figure.
	Engine Engine
	// Logger receives failed audit writes. Defaults to slog.Default().
	Logger *slog.Logger
	// AllowPrivateTargets permits http and private addresses (dev mode).
	AllowPrivateTargets bool
	// Retention is how long finished deliveries are kept: a delivery
	// asked for past it is a *GoneError. Defaults to store.RetentionDefault.
	Retention time.Duration
	// LinkSigner signs portal link tokens.
	LinkSigner access.Signer
	// Publisher publishes events and keeps each app's compiled filters.
	// Defaults to a new outbox.Publisher.
	Publisher *outbox.Publisher
	// Dispatcher is the dispatcher of the service's own process: a test
	// event whose publish sent no NOTIFY asks it for a round (see
	// outbox.Published.WakeAt). Defaults to nil: a process with no worker
	// role, whose rows the dispatchers find by their look after a round.
	Dispatcher Waker
}

// Waker is a dispatcher in the process (dispatch.Dispatcher).
type Waker interface {
	// Wake asks for a round by at.
	Wake(at time.Time)
}

// Service holds what the operations need; it is safe for concurrent use.
type Service struct {
	store        *store.Store
	engine       Engine
	logger       *slog.Logger
	allowPrivate bool
	retention    time.Duration
	links        access.Signer
	publisher    *outbox.Publisher
	dispatcher   Waker
}

// New returns the service.
func New(opts Options) *Service {
	pub := opts.Publisher
	if pub == nil {
		pub = outbox.NewPublisher()
	}
	return &Service{store: opts.Store, engine: opts.Engine, logger: cmp.Or(opts.Logger, slog.Default()),
		allowPrivate: opts.AllowPrivateTargets, retention: cmp.Or(opts.Retention, store.RetentionDefault),
		links: opts.LinkSigner, publisher: pub, dispatcher: opts.Dispatcher}
}

// Store is the service's database, for what lies outside the service
// (authentication, health).
func (s *Service) Store() *store.Store { return s.store }

// Engine is the service's delivery engine (nil when none is configured).
func (s *Service) Engine() Engine { return s.engine }

// Publisher publishes events and keeps the compiled filters.
func (s *Service) Publisher() *outbox.Publisher { return s.publisher }

// action is a state-changing call as the audit log records it: the REST
// route that serves it (gin's form), whichever adapter made it.
type action struct {
	method, route string
	status        int
}

// record writes a successful state-changing call of p to the audit log.
// The call succeeded: its record does not depend on the caller staying,
// and a failed write is logged, not answered.
func (s *Service) record(ctx context.Context, p access.Principal, appID string, a action, path string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	err := s.store.Audit(ctx, store.AuditEntry{AppID: appID, ActorKind: p.Kind, ActorID: p.ID, ActorName: p.Name,
		Method: a.method, Route: a.route, Path: path, Status: a.status})
	if err != nil {
		s.logger.Error("audit log write failed", "route", a.route, "actor", p.ID, "err", err)
	}
}

// principal is access.Principal, shortened for the many signatures here.
type principal = access.Principal

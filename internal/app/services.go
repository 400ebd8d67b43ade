package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"hookrelay/activities"
	"hookrelay/store"
	"hookrelay/worker"
)

// Service is one long-running part of a process (the HTTP server, the
// Temporal worker, the dispatcher, the pruner, a watcher): the supervisor
// runs each until its context ends.
type Service interface {
	// Name names the service in logs and errors.
	Name() string
	// Run runs until ctx ends (returning nil) or the service fails.
	Run(ctx context.Context) error
}

// serviceFunc is a Service made of a name and a function.
type serviceFunc struct {
	name string
	run  func(ctx context.Context) error
}

func (s serviceFunc) Name() string                  { return s.name }
func (s serviceFunc) Run(ctx context.Context) error { return s.run(ctx) }

// watcher is a Service of a loop that ends with its context.
func watcher(name string, watch func(ctx context.Context)) Service {
	return serviceFunc{name, func(ctx context.Context) error { watch(ctx); return nil }}
}

// supervisor runs a process's services and stops them in reverse start
// order: the order is the order start was called in, fixed in code.
type supervisor struct {
	errc   chan<- error
	logger *slog.Logger
	mu     sync.Mutex
	// running holds each started service's stop, in start order.
	running []func()
}

// start runs svc; an error it returns before being stopped is the
// process's failure (Stack.Wait returns it).
func (s *supervisor) start(svc Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(ctx); err != nil && ctx.Err() == nil {
			select {
			case s.errc <- fmt.Errorf("%s: %w", svc.Name(), err):
			default:
			}
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = append(s.running, func() {
		cancel()
		<-done
		s.logger.Debug("stopped", "service", svc.Name())
	})
}

// stop stops every service, the last started first, each before the next.
func (s *supervisor) stop() {
	s.mu.Lock()
	running := s.running
	s.running = nil
	s.mu.Unlock()
	for i := len(running) - 1; i >= 0; i-- {
		running[i]()
	}
}

// httpService serves srv on a listener bound when the process started, so
// its address is known before it runs; stopping it lets open requests
// finish within shutdown.
type httpService struct {
	name     string
	srv      *http.Server
	listener net.Listener
	shutdown time.Duration
}

func (h *httpService) Name() string { return h.name }

// Run serves until ctx ends, then returns once Shutdown has: Serve
// returns ErrServerClosed as soon as Shutdown begins, while open requests
// still run, and the services stopped after this one (the worker) and the
// pools closed after them must not go while a request still uses them.
func (h *httpService) Run(ctx context.Context) error {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), h.shutdown)
		defer cancel()
		_ = h.srv.Shutdown(sctx)
	}()
	if err := h.srv.Serve(h.listener); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return nil
}

// workerService is the Temporal worker, started (polling) when its role
// was assembled, so a worker that cannot start fails the process's start.
// Stopping it stops polling, then waits (within drain) for the requests on
// the wire to finish and be recorded, each bounded by its own timeout.
type workerService struct {
	worker  worker.Workers
	acts    *activities.Activities
	batched *store.Batched
	drain   time.Duration
}

func (*workerService) Name() string { return "worker" }

func (w *workerService) Run(ctx context.Context) error {
	<-ctx.Done()
	w.worker.Stop()
	dctx, cancel := context.WithTimeout(context.Background(), w.drain)
	defer cancel()
	w.acts.Open.Drain(dctx)
	w.batched.Close()
	return nil
}

// PruneInterval is how often a worker process prunes what is past the
// retention.
const PruneInterval = time.Hour

// pruner deletes what is past the retention at start and every
// PruneInterval; a failure is logged and tried again at the next turn.
type pruner struct {
	store  *store.Store
	keep   time.Duration
	logger *slog.Logger
}

func (*pruner) Name() string { return "pruner" }

func (p *pruner) Run(ctx context.Context) error {
	for {
		res, err := p.store.Prune(ctx, time.Now(), p.keep)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			p.logger.Warn("pruning failed; will try again", "err", err, "retry_in", PruneInterval)
		case res.Deliveries+res.Events > 0:
			p.logger.Info("pruned", "deliveries", res.Deliveries, "events", res.Events, "sequences", res.Sequences, "older_than", p.keep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(PruneInterval):
		}
	}
}

package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// supervisor runs a process's long-running services, each a Run(ctx)
// error, and stops them in reverse start order: the order is the order
// run was called in, fixed in code.
type supervisor struct {
	errc   chan<- error
	logger *slog.Logger
	mu     sync.Mutex
	// running holds each started service's stop, in start order.
	running []func()
}

// run starts a service; an error it returns before being stopped is the
// process's failure (Stack.Wait returns it).
func (s *supervisor) run(name string, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			select {
			case s.errc <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = append(s.running, func() {
		cancel()
		<-done
		s.logger.Debug("stopped", "service", name)
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

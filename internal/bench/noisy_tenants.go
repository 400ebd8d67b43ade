package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// The noisy-neighbour run's A apps (see RunNoisy), made anew each round.

// tenants are one round's A apps: one whose endpoint answers after 5 s,
// one whose endpoint never answers; or one ordered app (Options.OrderedA).
type tenants struct{ slow, silent, ordered string }

// beside is the A app each of a round's phases (phaseNames) sends to
// beside B ("": none): none, as.slow, as.silent; none in all with quiet;
// none, then as.ordered.
func (as tenants) beside(quiet bool) []string {
	if as.ordered != "" {
		return []string{"", as.ordered}
	}
	if quiet {
		return []string{"", "", ""}
	}
	return []string{"", as.slow, as.silent}
}

// tenants creates round's A apps, their endpoints on slowURL; an ordered
// A's on fastURL, with its events accepted.
func (b *runner) tenants(ctx context.Context, round int, slowURL, fastURL string) (tenants, error) {
	if b.o.OrderedA > 0 {
		ordered, err := b.orderedTenant(ctx, round, fastURL)
		return tenants{ordered: ordered}, err
	}
	slow, err := b.app(ctx, fmt.Sprintf("tenant-a-slow-%d", round), slowURL+"?slow=1")
	if err != nil {
		return tenants{}, err
	}
	silent, err := b.app(ctx, fmt.Sprintf("tenant-a-silent-%d", round), slowURL)
	return tenants{slow: slow, silent: silent}, err
}

// dropTenants deletes as's apps, waits until the outbox is empty (their
// rows dropped, their deliveries' cancels sent; B sends nothing then),
// then for tenantsCooldown.
func (b *runner) dropTenants(ctx context.Context, as tenants) error {
	for _, id := range []string{as.slow, as.silent, as.ordered} {
		if id == "" {
			continue
		}
		code, err := b.call(ctx, "DELETE", "/v1/apps/"+id, nil, nil)
		if err != nil {
			return fmt.Errorf("delete app %s: %w", id, err)
		}
		if code != http.StatusNoContent {
			return fmt.Errorf("delete app %s: status %d", id, code)
		}
	}
	deadline := time.Now().Add(drainTenantsFor)
	for {
		var n int
		if err := b.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
			return fmt.Errorf("outbox after deleting the A apps: %w", err)
		}
		if n == 0 && as.ordered != "" {
			// Its sequencers end too (each finds its sequence gone).
			live, err := b.liveSequences(ctx)
			if err != nil {
				return err
			}
			n = live
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("outbox after deleting the A apps: %d rows left after %s", n, drainTenantsFor)
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return pause(ctx, tenantsCooldown)
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const (
	// drainTenantsFor bounds the wait for a deleted round's A apps to
	// leave the outbox.
	drainTenantsFor = 2 * time.Minute
	// tenantsCooldown follows it before the next round: longer than the
	// request timeout (10 s), so a request to A still open (a probe, a
	// retry) ends, with the workflow tasks the cancels set off, before B
	// alone is measured.
	tenantsCooldown = 15 * time.Second
)

// app creates an app with one endpoint to url on the bench's schedule.
func (b *runner) app(ctx context.Context, name, url string) (string, error) {
	var app struct{ ID string }
	if code, err := b.call(ctx, "POST", "/v1/apps", map[string]any{"name": name}, &app); err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("create app %s: %d %v", name, code, err)
	}
	if code, err := b.call(ctx, "POST", "/v1/apps/"+app.ID+"/endpoints", map[string]any{"url": url, "retry_schedule": b.o.Schedule}, nil); err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("create endpoint of %s: %d %v", name, code, err)
	}
	return app.ID, nil
}

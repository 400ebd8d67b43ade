package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"hookrelay/delivery"
)

// The ordered neighbour of `hookrelay bench --noisy --ordered K`
// (Options.OrderedA): app A has one fifo endpoint and K ordering keys, one
// event each, accepted while the endpoint is paused (not measured); B's
// phase beside it begins with the endpoint's resume, so every key's
// sequencer is woken and sends while B is measured.

// orderedTenant creates round's ordered A app: a paused fifo endpoint on url
// and one event for each of its keys.
func (b *runner) orderedTenant(ctx context.Context, round int, url string) (string, error) {
	name := fmt.Sprintf("tenant-a-ordered-%d", round)
	var app, ep struct{ ID string }
	if code, err := b.call(ctx, "POST", "/v1/apps", map[string]any{"name": name}, &app); err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("create app %s: %d %v", name, code, err)
	}
	body := map[string]any{"url": url, "retry_schedule": b.o.Schedule, "ordering": delivery.OrderingFIFO}
	if code, err := b.call(ctx, "POST", "/v1/apps/"+app.ID+"/endpoints", body, &ep); err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("create endpoint of %s: %d %v", name, code, err)
	}
	if code, err := b.call(ctx, "PATCH", "/v1/apps/"+app.ID+"/endpoints/"+ep.ID, map[string]any{"paused": true}, nil); err != nil || code != http.StatusOK {
		return "", fmt.Errorf("pause endpoint of %s: %d %v", name, code, err)
	}
	b.progress("noisy: round %d: accepting %d events of A, one per ordering key", round, b.o.OrderedA)
	failed := make(chan error, 1)
	fanOut(b.o.Concurrency, b.o.OrderedA, 0, func(i int) {
		ev := map[string]any{"type": "ledger.entry", "data": map[string]any{"i": i}, "ordering_key": "k" + strconv.Itoa(i)}
		if code, err := b.call(ctx, "POST", "/v1/apps/"+app.ID+"/events", ev, nil); err != nil || code != http.StatusAccepted {
			select {
			case failed <- fmt.Errorf("publish to %s: %d %v", name, code, err):
			default:
			}
		}
	})
	select {
	case err := <-failed:
		return "", err
	default:
	}
	return app.ID, nil
}

// resumeOrdered resumes the ordered A app's endpoint.
func (b *runner) resumeOrdered(ctx context.Context, appID string) error {
	var eps struct{ Data []struct{ ID string } }
	if code, err := b.call(ctx, "GET", "/v1/apps/"+appID+"/endpoints", nil, &eps); err != nil || code != http.StatusOK || len(eps.Data) != 1 {
		return fmt.Errorf("endpoints of %s: %d %v", appID, code, err)
	}
	if code, err := b.call(ctx, "PATCH", "/v1/apps/"+appID+"/endpoints/"+eps.Data[0].ID, map[string]any{"paused": false}, nil); err != nil || code != http.StatusOK {
		return fmt.Errorf("resume endpoint of %s: %d %v", appID, code, err)
	}
	return nil
}

// delivered counts app's deliveries that succeeded.
func (b *runner) delivered(ctx context.Context, appID string) (int, error) {
	var n int
	err := b.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE app_id = $1 AND status = $2`, appID, delivery.StatusSucceeded).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("deliveries of %s: %w", appID, err)
	}
	return n, nil
}

// liveSequences counts the sequences a sequencer's run holds now.
func (b *runner) liveSequences(ctx context.Context) (int, error) {
	var n int
	if err := b.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM sequence_holds WHERE leased_until > now()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("live sequences: %w", err)
	}
	return n, nil
}

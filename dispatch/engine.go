package dispatch

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"hookrelay/workflows"
)

// Engine answers the API's questions of Temporal (api.Engine).
type Engine struct {
	Client client.Client
}

// Healthy reports whether the Temporal frontend answers.
func (e Engine) Healthy(ctx context.Context) error {
	if _, err := e.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal health: %w", err)
	}
	return nil
}

// NextAttemptAt asks a delivery's running workflow when its next attempt is
// due.
func (e Engine) NextAttemptAt(ctx context.Context, deliveryID string) (*time.Time, error) {
	v, err := e.Client.QueryWorkflow(ctx, deliveryID, "", workflows.QueryState)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", deliveryID, err)
	}
	var st workflows.State
	if err := v.Get(&st); err != nil {
		return nil, fmt.Errorf("decode state of %s: %w", deliveryID, err)
	}
	return st.NextAttemptAt, nil
}

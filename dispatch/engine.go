package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"hookrelay/internal/temporalconn"
	"hookrelay/workflows"
)

// Engine answers the API's questions of Temporal (api.Engine).
type Engine struct {
	Client client.Client
	// Namespace is where hookrelay's workflows run; its search attributes
	// are checked by Healthy. Empty skips that check.
	Namespace string
}

// Healthy reports whether the Temporal frontend answers and the namespace
// has every search attribute hookrelay sets, with its type (a
// *temporalconn.NamespaceError otherwise).
func (e Engine) Healthy(ctx context.Context) error {
	if _, err := e.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal health: %w", err)
	}
	if e.Namespace == "" {
		return nil
	}
	err := temporalconn.Check(ctx, e.Client, "", e.Namespace)
	if _, unchecked := errors.AsType[*temporalconn.UncheckedError](err); unchecked {
		return nil
	}
	return err
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

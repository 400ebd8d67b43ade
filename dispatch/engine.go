package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"hookrelay/workflows"
)

// Engine answers the API's questions of Temporal (api.Engine).
type Engine struct {
	Client client.Client
	// Namespace is where hookrelay's workflows run; its search attributes
	// are checked by Healthy. Empty skips that check.
	Namespace string
}

// MissingSearchAttributesError is a namespace without some search
// attribute hookrelay sets (or with it under another type): every workflow
// start that sets it fails.
type MissingSearchAttributesError struct {
	Namespace string
	// Missing names each attribute with the type it needs.
	Missing []string
}

// MissingSearchAttributes lists what is missing (the API's readiness check
// sorts on it).
func (e *MissingSearchAttributesError) MissingSearchAttributes() []string { return e.Missing }

func (e *MissingSearchAttributesError) Error() string {
	return fmt.Sprintf("namespace %s lacks search attributes %s", e.Namespace, strings.Join(e.Missing, ", "))
}

// Healthy reports whether the Temporal frontend answers and the namespace
// has every search attribute hookrelay sets, with its type (a
// *MissingSearchAttributesError otherwise).
func (e Engine) Healthy(ctx context.Context) error {
	if _, err := e.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal health: %w", err)
	}
	if e.Namespace == "" {
		return nil
	}
	have, err := e.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: e.Namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of %s: %w", e.Namespace, err)
	}
	var missing []string
	for name, typ := range workflows.SearchAttributes() {
		if got, ok := have.GetCustomAttributes()[name]; !ok || got != typ {
			missing = append(missing, name+" ("+typ.String()+")")
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return &MissingSearchAttributesError{Namespace: e.Namespace, Missing: missing}
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

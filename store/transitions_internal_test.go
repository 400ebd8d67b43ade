package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
)

func TestTransitionErrorIsTyped(t *testing.T) {
	refused := fmt.Errorf("mark: %w", &pgconn.PgError{Code: transitionRefused, Detail: "dlv_1 canceled delivering"})
	te, ok := errors.AsType[*delivery.TransitionError](transitionError(refused))
	require.True(t, ok)
	require.Equal(t, delivery.TransitionError{DeliveryID: "dlv_1", From: delivery.StatusCanceled, To: delivery.StatusDelivering}, *te)
	other := &pgconn.PgError{Code: "23505"}
	require.Same(t, error(other), transitionError(other))
}

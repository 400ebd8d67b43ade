package store

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"hookrelay/delivery"
)

// transitionRefused is the SQLSTATE of the database's refusal of a status
// change the transition table does not allow (migration 016).
const transitionRefused = "HR001"

// transitionError turns the database's refusal of a status change into a
// *delivery.TransitionError (wrapping the database's error); any other
// error is returned as it is.
func transitionError(err error) error {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok || pgErr.Code != transitionRefused {
		return err
	}
	f := strings.Fields(pgErr.Detail) // "<id> <from> <to>"
	if len(f) != 3 {
		return err
	}
	return errors.Join(&delivery.TransitionError{DeliveryID: f[0], From: delivery.Status(f[1]), To: delivery.Status(f[2])}, err)
}

// markEvent is the event a workflow's mark of status is (MarkDelivery).
func markEvent(status delivery.Status) (delivery.Event, bool) {
	switch status {
	case delivery.StatusDelivering:
		return delivery.EventStart, true
	case delivery.StatusDeadLettered:
		return delivery.EventDeadLetter, true
	case delivery.StatusCanceled:
		return delivery.EventCancel, true
	}
	return "", false
}

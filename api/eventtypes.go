package api

import (
	"context"
	"sync"

	"hookrelay/store"
)

// MaxAppEventTypesDefault bounds the event types an app's own events may
// add to its catalog.
const MaxAppEventTypesDefault = 1000

// maxKnownTypes bounds typeBound's memory of known types; past it, it
// starts over.
const maxKnownTypes = 100000

// typeBound adds an event's type to its app's catalog before the event is
// published, within the app's bound, remembering which (app, type) pairs
// are known so that the usual event costs no query: a type, once in an
// app's catalog, stays there.
type typeBound struct {
	st    *store.Store
	limit int
	mu    sync.Mutex
	known map[[2]string]struct{}
}

func newTypeBound(st *store.Store, limit int) *typeBound {
	return &typeBound{st: st, limit: limit, known: map[[2]string]struct{}{}}
}

// admit makes typ part of app's catalog, or answers why not (an
// *store.EventTypeLimitError past the bound).
func (b *typeBound) admit(ctx context.Context, appID, typ string) error {
	key := [2]string{appID, typ}
	b.mu.Lock()
	_, ok := b.known[key]
	b.mu.Unlock()
	if ok {
		return nil
	}
	if err := b.st.AddAppEventType(ctx, appID, typ, b.limit); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.known) >= maxKnownTypes {
		b.known = map[[2]string]struct{}{}
	}
	b.known[key] = struct{}{}
	return nil
}

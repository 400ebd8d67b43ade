package service

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"hookrelay/store"
)

// Bounds of input.
const (
	// MaxNameLength bounds an app's name.
	MaxNameLength = 256
	// MaxDescriptionLength bounds an endpoint's description.
	MaxDescriptionLength = 1024
	// MaxURLLength bounds an endpoint's URL.
	MaxURLLength = 2048
	// PageLimitDefault and MaxPageLimit bound a list page.
	PageLimitDefault = 50
	MaxPageLimit     = 250
	// MaxRateLimit bounds an endpoint's rate_limit (deliveries per second).
	MaxRateLimit = 10000
	// MaxMaxInFlight bounds an endpoint's max_in_flight.
	MaxMaxInFlight = 1000
	// MinRetention and MaxRetention bound an app's retention override.
	MinRetention = time.Hour
	MaxRetention = 10 * 365 * 24 * time.Hour
	// MaxEventDeliveries bounds the deliveries listed with an event.
	MaxEventDeliveries = 1000
	// StatsLastDefault and MaxStatsLast bound the events stats cover.
	StatsLastDefault = 1000
	MaxStatsLast     = 100000
)

// Page asks for one page of a list.
type Page struct {
	// Limit is how many items, from 1 to MaxPageLimit; 0 asks for
	// PageLimitDefault, anything else is invalid.
	Limit int
	// Cursor is the NextCursor of the page before ("" for the first).
	Cursor string
}

// store checks p: a cursor no list could have given (not UTF-8, or with a
// NUL, which Postgres text cannot hold) or a limit out of bounds is an
// *InvalidError.
func (p Page) store() (store.Page, error) {
	if !utf8.ValidString(p.Cursor) || strings.ContainsRune(p.Cursor, 0) {
		return store.Page{}, invalidf("cursor", "cursor must be a next_cursor a list answered")
	}
	switch {
	case p.Limit == 0:
		p.Limit = PageLimitDefault
	case p.Limit < 1 || p.Limit > MaxPageLimit:
		return store.Page{}, invalidf("limit", "limit must be an integer from 1 to %d", MaxPageLimit)
	}
	return store.Page{Limit: p.Limit, Cursor: p.Cursor}, nil
}

// List is one page of a list; NextCursor, when not nil, asks for the next.
type List[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// listOf makes the page of items p asked for: a full page has a next one.
func listOf[T any](p store.Page, items []T, id func(T) string) List[T] {
	var next *string
	if len(items) == p.Limit && len(items) > 0 {
		n := id(items[len(items)-1])
		next = &n
	}
	if items == nil {
		items = []T{}
	}
	return List[T]{Data: items, NextCursor: next}
}

// appPage checks p and that app appID exists and p reaches it.
func (s *Service) appPage(ctx context.Context, pr principal, appID string, p Page) (store.Page, error) {
	if err := Authorize(pr, appID); err != nil {
		return store.Page{}, err
	}
	sp, err := p.store()
	if err != nil {
		return sp, err
	}
	if _, err := s.store.GetApp(ctx, appID); err != nil {
		return sp, typed(err)
	}
	return sp, nil
}

// lastOf checks a count of latest events: 0 is def, else from 1 to max.
func lastOf(field string, n, def, most int, detail string) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 1 || n > most:
		return 0, &InvalidError{Field: field, Detail: fmt.Sprintf(detail, most)}
	}
	return n, nil
}

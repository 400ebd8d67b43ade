package filter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// reviewInput is an ordinary-sized event: 16 KiB of data with a list of
// 200 line items (a typical order / invoice payload).
func reviewInput(t testing.TB, data any) *Input {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewInput(Event{Type: "order.created", Data: raw, Created: time.Now(), APIVersion: "2026-11-01"})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func lineItems(n int) []any {
	items := make([]any, n)
	for i := range items {
		items[i] = map[string]any{"sku": "SKU-0000000", "qty": i, "price": 12.5, "name": "a product name of some length"}
	}
	return items
}

// TestCostLimitChargesWholeWalks: a map or list equality and a string's
// size walk the whole value, but CEL charges them 1 by default, so a loop
// of them walked a large payload hundreds of times within the cost limit
// (review finding: one evaluation took up to 1 s on a 250 KiB event).
// deepCosts charges them by size (docs/contract.md#13-payload-filters), so
// each of these filters, valid at save time, ends at the limit after a
// few walks.
func TestCostLimitChargesWholeWalks(t *testing.T) {
	f := filters(t)
	small := reviewInput(t, map[string]any{"items": lineItems(200)})
	big := reviewInput(t, map[string]any{"items": lineItems(60), "w": map[string]any{"x": lineItems(1500)}, "s": strings.Repeat("é", 60<<10)})
	zs := make([]int, 120_000)
	zeros := reviewInput(t, map[string]any{"items": make([]int, 60), "w": map[string]any{"x": zs}})
	for _, c := range []struct {
		name, expr string
		in         *Input
	}{
		{"nested-equality-16KiB", "data.items.all(x, data.items.all(y, data == data))", small},
		{"wrapped-equality-200KiB", "data.items.all(x, data.items.all(y, data.w == data.w))", big},
		{"string-size-200KiB", "data.items.all(x, data.items.all(y, size(data.s) > 0))", big},
		{"wrapped-zeros-250KiB", "data.items.all(x, data.items.all(y, data.w == data.w))", zeros},
	} {
		p, err := f.Program(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		start := time.Now()
		ok, err := p.Match(c.in)
		took := time.Since(start)
		t.Logf("%s: matched=%v err=%v took=%s", c.name, ok, err, took)
		// Deterministic, not a timing: each walk of the payload is charged
		// by its size, so the loop stops at the limit after a few walks.
		if ok || err == nil || !strings.Contains(err.Error(), "cost limit") {
			t.Errorf("%s: matched=%v err=%v; want the cost limit", c.name, ok, err)
		}
	}
}

// TestLargeIntegersCompareExactly: a filter on a 64-bit ID (Snowflake-style
// account or order IDs producers send as JSON numbers; outbox.Validate
// accepts them) selects the wrong events: data's numbers are decoded as
// float64, so IDs that differ past 2^53 are equal.
func TestLargeIntegersCompareExactly(t *testing.T) {
	f := filters(t)
	p, err := f.Program("data.account_id == 1234567890123456789")
	if err != nil {
		t.Fatal(err)
	}
	mine := input(t, "invoice.paid", `{"account_id":1234567890123456789}`)
	other := input(t, "invoice.paid", `{"account_id":1234567890123456700}`)
	if ok, err := p.Match(mine); !ok || err != nil {
		t.Errorf("the account's own event: matched=%v err=%v", ok, err)
	}
	if ok, _ := p.Match(other); ok {
		t.Errorf("another account's event (account_id 1234567890123456700) matched data.account_id == 1234567890123456789")
	}
}

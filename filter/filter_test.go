package filter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func input(t *testing.T, typ, data string) *Input {
	t.Helper()
	in, err := NewInput(Event{Type: typ, Data: json.RawMessage(data), Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), APIVersion: "2026-11-01"})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func filters(t *testing.T) *Filters {
	t.Helper()
	f, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMatches(t *testing.T) {
	t.Parallel()
	f := filters(t)
	inv := input(t, "invoice.paid", `{"amount":7500,"currency":"usd","region":"eu","tags":["vip"],"customer":{"tier":"gold"}}`)
	small := input(t, "invoice.paid", `{"amount":120,"currency":"usd"}`)
	for _, c := range []struct {
		expr       string
		inv, small bool
	}{
		{"", true, true},
		{"data.amount >= 5000 && data.currency == 'usd'", true, false},
		{"type.startsWith('invoice.') && has(data.region) && data.region in ['eu', 'uk']", true, false},
		{"'vip' in data.tags", true, false}, // small: no tags → error → no match
		{"data.customer.tier == 'gold' || data.amount < 200", true, true},
		{"created > timestamp('2026-01-01T00:00:00Z') && api_version == '2026-11-01'", true, true},
		{"type.matches('^invoice\\\\.(paid|void)$')", true, true},
		{"data.amount == 120", false, true},   // a whole JSON number is an int
		{"data.amount == 120.0", false, true}, // and equals the same double
	} {
		p, err := f.Program(c.expr)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		for _, in := range []struct {
			name string
			in   *Input
			want bool
		}{{"inv", inv, c.inv}, {"small", small, c.small}} {
			got, _ := p.Match(in.in)
			if got != in.want {
				t.Errorf("%q on %s = %v, want %v", c.expr, in.name, got, in.want)
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	f := filters(t)
	for _, c := range []struct{ expr, want string }{
		{"data.amount >= ", "<input>:1:16"},                           // syntax, with line and column
		{"type > 5", "no matching overload"},                          // type error
		{"unknown_var == 1", "undeclared reference to 'unknown_var'"}, // unknown variable
		{"type", "must be a boolean expression, not string"},          // not a boolean
		{"data.flag", "must be a boolean expression, not dyn"},        // dyn is not a boolean either
		{"type.matches(data.pattern)", "matches() takes a literal pattern"},
		{"matches(type, api_version)", "matches() takes a literal pattern"},
		{"type == '" + strings.Repeat("x", MaxBytes) + "'", "at most 4096"},
	} {
		err := f.Check(c.expr)
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Errorf("%.40q: err %v, want a CompileError", c.expr, err)
			continue
		}
		if !strings.Contains(ce.Message, c.want) {
			t.Errorf("%.40q: %q does not say %q", c.expr, ce.Message, c.want)
		}
	}
	if err := f.Check("  "); err != nil {
		t.Errorf("blank filter: %v", err)
	}
}

func TestEvaluationErrorsDoNotMatch(t *testing.T) {
	t.Parallel()
	f := filters(t)
	in := input(t, "order.created", `{"amount":"12","items":[1,2,3]}`)
	for _, c := range []struct{ expr, want string }{
		{"data.region == 'eu'", "no such key: region"},
		{"data.amount + 1 > 2", "no such overload"},
		{"data.items[7] == 1", "index"},
	} {
		r := f.Eval(c.expr, in)
		if r.Matched || !strings.Contains(r.Err, c.want) {
			t.Errorf("%q = %+v, want no match with %q", c.expr, r, c.want)
		}
		p, _ := f.Program(c.expr)
		if _, err := p.Match(in); !errors.As(err, new(*EvalError)) {
			t.Errorf("%q: err %v, want an EvalError", c.expr, err)
		}
	}
}

// A filter whose work grows with the payload stops at CostLimit and does
// not match; the same filter on a small payload passes.
func TestCostLimit(t *testing.T) {
	t.Parallel()
	f := filters(t)
	expr := "data.items.all(x, data.items.all(y, x + y >= 0))"
	items := make([]int, 400)
	big, _ := json.Marshal(map[string]any{"items": items})
	r := f.Eval(expr, input(t, "a.b", string(big)))
	if r.Matched || !strings.Contains(r.Err, "cost limit") {
		t.Errorf("big payload: %+v, want the cost limit", r)
	}
	if r := f.Eval(expr, input(t, "a.b", `{"items":[1,2,3]}`)); !r.Matched || r.Err != "" {
		t.Errorf("small payload: %+v", r)
	}
}

func TestProgramsAreCached(t *testing.T) {
	t.Parallel()
	f := filters(t)
	a, _ := f.Program("type == 'a.b'")
	b, _ := f.Program("type == 'a.b'")
	if a != b {
		t.Error("the same text compiled twice")
	}
	r := f.Eval("type ==", input(t, "a.b", `{}`))
	if r.Matched || !strings.HasPrefix(r.Err, "filter does not compile") {
		t.Errorf("a broken saved filter: %+v", r)
	}
}

func BenchmarkMatch(b *testing.B) {
	f, _ := New()
	p, err := f.Program("type.startsWith('invoice.') && data.amount >= 5000 && data.currency in ['usd', 'eur'] && has(data.customer) && data.customer.tier != 'trial'")
	if err != nil {
		b.Fatal(err)
	}
	in, _ := NewInput(Event{Type: "invoice.paid", Data: json.RawMessage(`{"amount":7500,"currency":"usd","customer":{"id":"cus_1","tier":"gold"},"lines":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`)})
	for b.Loop() {
		if ok, _ := p.Match(in); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkCostLimit is the worst a filter can cost one event: it runs
// until CostLimit stops it.
func BenchmarkCostLimit(b *testing.B) {
	f, _ := New()
	items := make([]int, 400)
	big, _ := json.Marshal(map[string]any{"items": items, "s": strings.Repeat("ab", 128<<10-8)}) // the largest payload
	in, _ := NewInput(Event{Type: "a.b", Data: big})
	for _, expr := range []string{
		"data.items.all(x, data.items.all(y, x + y >= 0))",
		"data.items.exists(x, data.s.contains('zz' + string(x)))",
		"data.s.matches('(a|b)*c')",
	} {
		p, err := f.Program(expr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr[:20], func(b *testing.B) {
			for b.Loop() {
				_, _ = p.Match(in)
			}
		})
	}
}

package filter

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hostileCase is a filter valid at save time that tries to make one
// evaluation on a large event expensive.
type hostileCase struct {
	name, expr string
}

// hostileCases work on data's dynamic values, whose operations CEL's cost
// estimator cannot see: membership, size, concatenation, comparison and
// matches() on a large field, inside loops.
func hostileCases() []hostileCase {
	concat := "size(" + strings.TrimSuffix(strings.Repeat("data.s + ", 240), " + ") + ") > 0"
	return []hostileCase{
		{"in-list-in-loop", "data.xs.exists(x, -1 in data.xs)"},
		{"in-list-once", "-1 in data.xs"},
		{"in-map-in-loop", "data.xs.exists(x, 'missing' in data.m)"},
		{"concat-240", concat},
		{"concat-in-loop", "data.xs.exists(x, size(data.s + data.s) < 0)"},
		{"list-concat-in-loop", "data.xs.exists(x, size(data.xs + data.xs) < 0)"},
		{"matches-long-pattern", "data.s.matches('" + strings.Repeat("[a-z]", 360) + "x')"},
		{"matches-in-loop", "data.xs.exists(x, data.s.matches('a+b'))"},
		{"contains-long", "data.s.contains('" + strings.Repeat("ab", 500) + "')"},
		{"contains-in-loop", "data.xs.exists(x, data.s.contains('zz'))"},
		{"startswith-self", "data.xs.exists(x, data.s.startsWith(data.s + 'x'))"},
		{"compare-strings", "data.xs.exists(x, data.s < data.s)"},
		{"equal-lists", "data.xs.exists(x, data.xs != data.xs)"},
		{"equal-maps", "data.xs.exists(x, data.m != data.m)"},
		{"size-string", "data.xs.exists(x, size(data.s) < 0)"},
		{"nested-loops", "data.xs.all(x, data.xs.all(y, x != y || true))"},
		{"map-of-lists", "size(data.xs.map(x, data.xs)) < 0"},
		{"string-of-list", "data.xs.exists(x, string(x) + data.s == 'z')"},
		{"list-literal", "[data.s, data.s, data.s, data.s].exists(v, v.contains('zz'))"},
		{"int-of-string-in-loop", "data.xs.exists(x, int(data.s) == 1)"},
		{"timestamp-chain", strings.TrimSuffix(strings.Repeat("timestamp(data.s) < created || ", 120), " || ")},
	}
}

// hostileInput is a 256 KiB event: a 160 KiB string, 12,000 numbers and a
// map of 2,000 keys.
func hostileInput(t testing.TB) *Input {
	xs := make([]int, 12_000)
	for i := range xs {
		xs[i] = i
	}
	m := map[string]any{}
	for i := range 2_000 {
		m[fmt.Sprintf("key-%05d", i)] = i
	}
	return reviewInput(t, map[string]any{"s": strings.Repeat("a", 160<<10), "xs": xs, "m": m})
}

// evaluate compiles expr and evaluates it once on in, answering its
// verdict, how long it took and the bytes it allocated.
func evaluate(t *testing.T, f *Filters, expr string, in *Input) (ok bool, err error, took time.Duration, alloc uint64) {
	t.Helper()
	p, err := f.Program(expr)
	if err != nil {
		t.Fatalf("%.40s…: %v", expr, err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	ok, err = p.Match(in)
	took = time.Since(start)
	runtime.ReadMemStats(&after)
	return ok, err, took, after.TotalAlloc - before.TotalAlloc
}

// TestHostileFiltersAreBounded: each hostile filter, on a 256 KiB event
// decoded once beforehand (as fan-out does), ends (matching, or not at the
// cost limit) having allocated under 1 MB. The time each took is printed,
// not asserted (docs/benchmarks.md holds the table).
func TestHostileFiltersAreBounded(t *testing.T) {
	f := filters(t)
	in := hostileInput(t)
	for _, c := range hostileCases() {
		ok, err, took, alloc := evaluate(t, f, c.expr, in)
		t.Logf("%-22s %8s %9d B  matched=%v err=%v", c.name, took.Round(time.Microsecond), alloc, ok, err)
		if alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes; at most 1 MiB", c.name, alloc)
		}
		if ok {
			t.Errorf("%s matched", c.name)
		}
		if err != nil && len(err.Error()) > MaxErrorBytes {
			t.Errorf("%s: a %d-byte error (stored with the event); at most %d", c.name, len(err.Error()), MaxErrorBytes)
		}
	}
}

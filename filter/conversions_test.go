package filter

import (
	"strings"
	"testing"
	"time"
)

// hostileConversions: calls the size charges do not name (conversions
// other than string()/bytes(), an index on a missing key) whose cost is
// counted by CEL as 1 while each copies the whole 160 KiB string (an
// error message quoting it, or strconv's clone of it in its NumError).
func hostileConversions() []hostileCase {
	return []hostileCase{
		{"int-of-string-in-loop", "data.xs.exists(x, int(data.s) == 1)"},
		{"uint-of-string-in-loop", "data.xs.exists(x, uint(data.s) == 1u)"},
		{"double-of-string-in-loop", "data.xs.exists(x, double(data.s) == 1.0)"},
		{"bool-of-string-in-loop", "data.xs.exists(x, bool(data.s))"},
		{"timestamp-of-string-in-loop", "data.xs.exists(x, timestamp(data.s) == created)"},
		{"duration-of-string-in-loop", "data.xs.exists(x, duration(data.s) == duration('1s'))"},
		{"missing-key-in-loop", "data.xs.exists(x, data.m[data.s] == 1)"},
	}
}

// TestHostileUnchargedConversions: conversions (int, double, timestamp,
// duration, …) of a large field are charged by its size, like every
// operation, so a filter valid at save time allocates < 1 MB on a 256 KiB
// event.
func TestHostileUnchargedConversions(t *testing.T) {
	f := filters(t)
	in := hostileInput(t)
	for _, c := range hostileConversions() {
		ok, err, took, alloc := evaluate(t, f, c.expr, in)
		t.Logf("%-28s %8s %11d B  matched=%v err=%v", c.name, took.Round(time.Microsecond), alloc, ok, err)
		if alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes; at most 1 MiB", c.name, alloc)
		}
	}
}

// TestTimestampChainNoLoop: a chain of timestamp() calls on a 160 KiB
// string, with no comprehension for the 20 ms interrupt to stop, ends at
// the first call: each is charged by the text it parses (and would quote
// into its error). The time it took is printed, not asserted.
func TestTimestampChainNoLoop(t *testing.T) {
	f := filters(t)
	in := hostileInput(t)
	expr := "[data.s].exists(s, "
	for len(expr) < MaxBytes-40 {
		expr += "timestamp(s)<created||"
	}
	expr += "false)"
	ok, err, took, alloc := evaluate(t, f, expr, in)
	t.Logf("took %s, allocated %d B, matched=%v, err=%v", took, alloc, ok, err)
	if ok || err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Errorf("matched=%v err=%v; want the cost limit", ok, err)
	}
	if alloc > 1<<20 {
		t.Errorf("allocated %d bytes; at most 1 MiB", alloc)
	}
}

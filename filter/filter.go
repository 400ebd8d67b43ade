// Package filter holds endpoints' payload filters: CEL expressions
// (github.com/google/cel-go) over an event's type, data, created and
// api_version. A filter is compiled and type-checked when it is saved
// (Check) and evaluated at fan-out (Program.Match) with a bounded cost; an
// evaluation error counts as no match. See docs/contract.md#13-payload-filters.
package filter

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/interpreter"
)

// Bounds on filters.
const (
	// MaxBytes is the longest filter expression accepted.
	MaxBytes = 4 << 10
	// CostLimit is CEL's cost budget for one evaluation of one filter; an
	// evaluation past it stops and counts as no match (an EvalError). A
	// comparison costs about 1, a string scan about one per 10 bytes, every
	// operation on data's values is charged by the size it touches (see
	// sizeCharges), and matches() is checked before it runs; the filters
	// users write cost 10–50.
	CostLimit = 1_000
	// EvalTimeout is a backstop beside the cost limit: an evaluation still
	// running after it stops at its next loop step and counts as no match.
	EvalTimeout = 20 * time.Millisecond
	// CacheSize is how many compiled programs a Filters keeps; past it
	// the least recently used one goes, one at a time (a burst of filters
	// tried and never saved does not drop the saved ones all at once).
	CacheSize = 4096
)

// CompileError is a filter that does not compile, does not type-check or
// is not a boolean expression. Message is CEL's, with line and column.
type CompileError struct {
	Message string
}

func (e *CompileError) Error() string { return e.Message }

// EvalError is a filter that failed on one event (a missing field read
// without has(), a type mismatch, the cost limit): the event does not
// match.
type EvalError struct {
	Message string
}

func (e *EvalError) Error() string { return e.Message }

// Event is what a filter sees of an event.
type Event struct {
	Type       string
	Data       json.RawMessage // a JSON object
	Created    time.Time
	APIVersion string
}

// Filters compiles filters and caches their programs by expression text
// (a changed filter is another text, so another program). Safe for
// concurrent use; the zero value is not: use New.
type Filters struct {
	env *cel.Env
	mu  sync.Mutex
	// programs are compiled programs by expression text, each an element
	// of recent (its Value a *cached), most recently used first.
	programs map[string]*list.Element
	recent   list.List
}

// cached is one program of the cache.
type cached struct {
	expr string
	prg  *Program
}

// New returns a Filters with an empty cache.
func New() (*Filters, error) {
	env, err := cel.NewEnv(
		cel.Variable("type", cel.StringType),
		cel.Variable("data", cel.DynType),
		cel.Variable("created", cel.TimestampType),
		cel.Variable("api_version", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		return nil, fmt.Errorf("filter environment: %w", err)
	}
	return &Filters{env: env, programs: map[string]*list.Element{}}, nil
}

// Program is a compiled filter.
type Program struct {
	prg cel.Program
}

// Check compiles expr and reports why it cannot be saved (a *CompileError),
// nil for a valid filter or an empty one (every event).
func (f *Filters) Check(expr string) error {
	_, err := f.Program(expr)
	return err
}

// Program returns expr's compiled program (nil for "", which matches every
// event), from the cache when it was compiled before.
func (f *Filters) Program(expr string) (*Program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	f.mu.Lock()
	if e, ok := f.programs[expr]; ok {
		f.recent.MoveToFront(e)
		f.mu.Unlock()
		return e.Value.(*cached).prg, nil
	}
	f.mu.Unlock()
	p, err := f.compile(expr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.programs[expr]; ok {
		// Compiled meanwhile by another caller.
		f.recent.MoveToFront(e)
		return e.Value.(*cached).prg, nil
	}
	if len(f.programs) >= CacheSize {
		oldest := f.recent.Back()
		f.recent.Remove(oldest)
		delete(f.programs, oldest.Value.(*cached).expr)
	}
	f.programs[expr] = f.recent.PushFront(&cached{expr: expr, prg: p})
	return p, nil
}

// cachedPrograms is how many programs f keeps.
func (f *Filters) cachedPrograms() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.programs)
}

func (f *Filters) compile(expr string) (*Program, error) {
	if len(expr) > MaxBytes {
		return nil, &CompileError{Message: fmt.Sprintf("is %d bytes; at most %d", len(expr), MaxBytes)}
	}
	checked, iss := f.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, &CompileError{Message: strings.TrimSpace(iss.String())}
	}
	if t := checked.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, &CompileError{Message: fmt.Sprintf("must be a boolean expression, not %s (compare a field, e.g. data.paid == true)", t)}
	}
	if err := literalPatterns(checked); err != nil {
		return nil, err
	}
	prg, err := f.env.Program(checked, cel.CostLimit(CostLimit), cel.CostTracking(sizeCharges{}),
		cel.OptimizeRegex(boundedMatches), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, &CompileError{Message: err.Error()}
	}
	return &Program{prg: prg}, nil
}

// literalPatterns refuses a matches() whose pattern is not a literal: a
// literal is compiled once with the program (RE2: linear time), a
// computed one would be compiled on every evaluation.
func literalPatterns(checked *cel.Ast) error {
	nav := ast.NavigateAST(checked.NativeRep())
	for _, call := range ast.MatchDescendants(nav, ast.FunctionMatcher(overloads.Matches)) {
		args := call.AsCall().Args()
		if len(args) == 0 || args[len(args)-1].Kind() != ast.LiteralKind {
			loc := checked.NativeRep().SourceInfo().GetStartLocation(call.ID())
			return &CompileError{Message: fmt.Sprintf("ERROR: <input>:%d:%d: matches() takes a literal pattern", loc.Line(), loc.Column()+1)}
		}
	}
	return nil
}

// Input is one event prepared for evaluation: its data decoded once for
// every filter it meets.
type Input struct {
	act interpreter.Activation
}

// NewInput decodes ev for evaluation.
func NewInput(ev Event) (*Input, error) {
	dec := json.NewDecoder(bytes.NewReader(ev.Data))
	dec.UseNumber()
	var data map[string]any
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("event data: %w", err)
	}
	exactNumbers(data)
	act, err := interpreter.NewActivation(map[string]any{
		"type": ev.Type, "data": data, "created": ev.Created.UTC(), "api_version": ev.APIVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("event activation: %w", err)
	}
	return &Input{act: act}, nil
}

// exactNumbers replaces, in place, each JSON number of v by an int (a
// whole number that fits 64 bits, signed or not) or a double (any other):
// a filter on a 64-bit ID compares it exactly (review finding: decoded as
// doubles, IDs that differ past 2^53 were equal).
func exactNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u
		}
		f, _ := v.Float64() // outbox.Validate refused what no float64 holds
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = exactNumbers(e)
		}
	}
	return v
}

// Match evaluates p on in: true when the event passes, false with a
// *EvalError when the filter failed on it. A nil Program matches.
func (p *Program) Match(in *Input) (bool, error) {
	if p == nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	out, _, err := p.prg.ContextEval(ctx, in.act)
	if err != nil {
		return false, &EvalError{Message: bounded(err.Error())}
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, &EvalError{Message: fmt.Sprintf("result is %s, not a bool", out.Type())}
	}
	return b, nil
}

// MaxErrorBytes bounds an evaluation error's message (an error may quote
// the value it failed on, a whole field of the event): it is stored with
// the event, once per endpoint whose filter failed.
const MaxErrorBytes = 512

// bounded is msg cut to MaxErrorBytes, on a rune boundary, marked when cut.
func bounded(msg string) string {
	if len(msg) <= MaxErrorBytes {
		return msg
	}
	cut := MaxErrorBytes - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// Result is one filter's verdict on one event.
type Result struct {
	Matched bool
	// Err is the evaluation's failure (Matched is false), "" for none.
	Err string
}

// Eval compiles (or fetches) expr and evaluates it on in. A filter that
// no longer compiles (saved under another version) is an evaluation
// error: the event does not match.
func (f *Filters) Eval(expr string, in *Input) Result {
	p, err := f.Program(expr)
	if err == nil {
		var ok bool
		if ok, err = p.Match(in); err == nil {
			return Result{Matched: ok}
		}
	}
	var ce *CompileError
	if errors.As(err, &ce) {
		return Result{Err: "filter does not compile: " + ce.Message}
	}
	return Result{Err: err.Error()}
}

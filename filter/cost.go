package filter

import (
	"fmt"
	"regexp"

	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// interruptEvery is how many loop steps pass between checks of an
// evaluation's EvalTimeout.
const interruptEvery = 64

// sizeCharges charges each call by the size of what it touches, by its
// function's name: data is dynamically typed, so a call on its values
// often has no resolved overload, and CEL's own charges (by overload) then
// count it as 1 whatever it walked (review finding: `-1 in data.xs` over
// 100,000 numbers cost 3). Units are CEL's: one per element, one per 10
// bytes of text. Each charge follows its call; the cost limit stops the
// evaluation at the first call that passes it, so no call after that runs.
type sizeCharges struct{}

// CallCost implements interpreter.ActualCostEstimator.
func (sizeCharges) CallCost(function, overloadID string, args []ref.Val, _ ref.Val) *uint64 {
	c := callCost(function, overloadID, args)
	if c == 0 {
		return nil // CEL's own charge
	}
	return &c
}

// callCost is what a call of function on args costs, 0 when CEL's own
// charge applies.
func callCost(function, overloadID string, args []ref.Val) uint64 {
	arg := func(i int) any {
		if i < len(args) {
			return args[i].Value()
		}
		return nil
	}
	switch function {
	case operators.In:
		if _, isMap := args[len(args)-1].(traits.Mapper); isMap {
			return 1 + deepSize(arg(0), CostLimit)
		}
		return deepSize(arg(len(args)-1), CostLimit+1)
	case overloads.Size:
		return 1 + textLen(arg(len(args)-1))/10
	case operators.Add:
		if textLen(arg(0))+textLen(arg(1)) > 0 {
			return 1 + (textLen(arg(0))+textLen(arg(1)))/10
		}
		return 1 + listLen(args[0]) + listLen(args[1])
	case operators.Equals, operators.NotEquals:
		return min(deepSize(arg(0), CostLimit+1), deepSize(arg(1), CostLimit+1))
	case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
		return 1 + min(textLen(arg(0)), textLen(arg(1)))/10
	case overloads.Contains, overloads.StartsWith, overloads.EndsWith:
		return 1 + (textLen(arg(0))+textLen(arg(1)))/10
	case overloads.Matches:
		return matchCost(textLen(arg(0)), textLen(arg(1)))
	}
	if overloads.IsTypeConversionFunction(function) {
		// string(), int(), double(), timestamp(), duration(), … parse or
		// copy their argument's text (and an error quotes it).
		return 1 + textLen(arg(0))/10
	}
	return 0
}

// matchCost is the cost of matching n bytes of text against a pattern of
// m bytes: RE2 runs in O(n·m), counted as CEL counts it (a pattern's
// state for every 4 bytes of it).
func matchCost(n, m uint64) uint64 {
	return (1 + n/10) * (1 + m/4)
}

// boundedMatches compiles a matches() pattern once (filters take only
// literal patterns) and refuses, before running it, a match whose cost
// (matchCost) passes the cost limit on its own: CEL charges a call after
// it runs (review finding: a 1.8 KB pattern on a 32 KiB field ran 1.12 s
// before "cost limit exceeded").
var boundedMatches = &interpreter.RegexOptimization{
	Function:   overloads.Matches,
	RegexIndex: 1,
	Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, err
		}
		m := uint64(len(pattern))
		return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(values ...ref.Val) ref.Val {
			if len(values) != 2 {
				return types.NoSuchOverloadErr()
			}
			in, ok := values[0].Value().(string)
			if !ok {
				return types.NoSuchOverloadErr()
			}
			if c := matchCost(uint64(len(in)), m); c > CostLimit {
				panic(interpreter.EvalCancelledError{Cause: interpreter.CostLimitExceeded,
					Message: fmt.Sprintf("operation cancelled: actual cost limit exceeded (matches() on %d bytes with a %d-byte pattern costs %d)", len(in), m, c)})
			}
			return types.Bool(re.MatchString(in))
		}), nil
	},
}

// textLen is the length of a string or bytes value, 0 for any other.
func textLen(v any) uint64 {
	switch v := v.(type) {
	case string:
		return uint64(len(v))
	case []byte:
		return uint64(len(v))
	}
	return 0
}

// listLen is the number of elements of a list value, 0 for any other.
func listLen(v ref.Val) uint64 {
	if l, ok := v.(traits.Lister); ok {
		if n, ok := l.Size().(types.Int); ok {
			return uint64(n)
		}
	}
	return 0
}

// deepSize is the work of walking v: one per element, one per 10 bytes of
// text, counted no further than past limit (the walk stops there).
func deepSize(v any, limit uint64) uint64 {
	n := uint64(0)
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch v := v.(type) {
		case string:
			n += 1 + uint64(len(v))/10
		case []byte:
			n += 1 + uint64(len(v))/10
		case map[string]any:
			n++
			for k, e := range v {
				walk(k)
				walk(e)
			}
		case []any:
			n++
			for _, e := range v {
				walk(e)
			}
		case []ref.Val:
			n++
			for _, e := range v {
				walk(e.Value())
			}
		case map[ref.Val]ref.Val:
			n++
			for k, e := range v {
				walk(k.Value())
				walk(e.Value())
			}
		default:
			n++
		}
	}
	walk(v)
	return n
}

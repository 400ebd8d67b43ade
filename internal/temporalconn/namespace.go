package temporalconn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"hookrelay/delivery"
	"hookrelay/workflows"
)

// HistoryRetention is how long a namespace Setup registers keeps closed
// workflow histories: a day past the dead-letter retention, so a dead
// letter's history is still there when its parked run completes.
const HistoryRetention = delivery.RetentionDefault + 24*time.Hour

// SearchAttribute is a custom search attribute and its type.
type SearchAttribute struct {
	Name string
	Type enumspb.IndexedValueType
}

// TypeName is the type as Temporal's CLI and configuration spell it
// (Keyword, KeywordList, …).
func (a SearchAttribute) TypeName() string { return a.Type.String() }

// CreateCommand is the Temporal CLI command that registers a on namespace.
func (a SearchAttribute) CreateCommand(namespace string) string {
	return fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s", namespace, a.Name, a.TypeName())
}

// Required lists the search attributes hookrelay's workflows set, by name:
// the one list `hookrelay dev`, Check, Setup, the README and the compose
// file follow.
func Required() []SearchAttribute { return FromMap(workflows.SearchAttributes()) }

// FromMap lists m's attributes by name.
func FromMap(m map[string]enumspb.IndexedValueType) []SearchAttribute {
	out := make([]SearchAttribute, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, SearchAttribute{Name: name, Type: m[name]})
	}
	return out
}

// NamespaceError is a namespace hookrelay cannot run on: it does not exist,
// or it lacks search attributes hookrelay sets (or has one under another
// type), so every workflow start that sets one would fail.
type NamespaceError struct {
	Address, Namespace string
	// NotFound: the namespace does not exist.
	NotFound bool
	// Missing lists the attributes absent; Mistyped those present under
	// another type (with the type they need).
	Missing, Mistyped []SearchAttribute
}

// MissingSearchAttributes names each attribute missing or mistyped with the
// type it needs.
func (e *NamespaceError) MissingSearchAttributes() []string {
	var out []string
	for _, a := range slices.Concat(e.Missing, e.Mistyped) {
		out = append(out, a.Name+" ("+a.TypeName()+")")
	}
	return out
}

func (e *NamespaceError) Error() string {
	var sb strings.Builder
	at := ""
	if e.Address != "" {
		at = " at " + e.Address
	}
	if e.NotFound {
		fmt.Fprintf(&sb, "Temporal namespace %q does not exist%s: run `hookrelay setup-temporal`, or create it and its search attributes:\n", e.Namespace, at)
		fmt.Fprintf(&sb, "  temporal operator namespace create --namespace %s --retention 8d\n", e.Namespace)
		for _, a := range Required() {
			sb.WriteString("  " + a.CreateCommand(e.Namespace) + "\n")
		}
		return strings.TrimSuffix(sb.String(), "\n")
	}
	fmt.Fprintf(&sb, "Temporal namespace %q%s lacks search attributes hookrelay sets: %s; run `hookrelay setup-temporal`, or:\n",
		e.Namespace, at, strings.Join(e.MissingSearchAttributes(), ", "))
	for _, a := range e.Mistyped {
		fmt.Fprintf(&sb, "  temporal operator search-attribute remove --namespace %s --name %s   (it has another type)\n", e.Namespace, a.Name)
	}
	for _, a := range slices.Concat(e.Missing, e.Mistyped) {
		sb.WriteString("  " + a.CreateCommand(e.Namespace) + "\n")
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// Check reports whether the namespace exists and has every attribute of
// Required with its type (a *NamespaceError otherwise). address only names
// the cluster in the message.
func Check(ctx context.Context, c client.Client, address, namespace string) error {
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if _, ok := errors.AsType[*serviceerror.NamespaceNotFound](err); ok {
		return &NamespaceError{Address: address, Namespace: namespace, NotFound: true, Missing: Required()}
	}
	if err != nil {
		return fmt.Errorf("describe Temporal namespace %s: %w", namespace, err)
	}
	missing, mistyped, err := compare(ctx, c, namespace, Required())
	if err != nil {
		return err
	}
	if len(missing)+len(mistyped) > 0 {
		return &NamespaceError{Address: address, Namespace: namespace, Missing: missing, Mistyped: mistyped}
	}
	return nil
}

// compare lists the attributes of want that namespace lacks or has under
// another type.
func compare(ctx context.Context, c client.Client, namespace string, want []SearchAttribute) (missing, mistyped []SearchAttribute, err error) {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, nil, fmt.Errorf("list search attributes of Temporal namespace %s: %w", namespace, err)
	}
	for _, a := range want {
		switch got, ok := have.GetCustomAttributes()[a.Name]; {
		case !ok:
			missing = append(missing, a)
		case got != a.Type:
			mistyped = append(mistyped, a)
		}
	}
	return missing, mistyped, nil
}

// Setup prepares namespace for hookrelay: it registers the namespace when
// it does not exist (keeping closed histories for retention) and adds the
// search attributes of want (Required, for hookrelay) it lacks, and answers
// what it added. An
// attribute present under another type is an error: Temporal cannot change
// a type in place. It needs the operator's permissions; a new namespace
// takes a few seconds to accept them, which Setup waits out (bounded by
// ctx).
func Setup(ctx context.Context, c client.Client, namespace string, retention time.Duration, want []SearchAttribute) (added []string, err error) {
	ws := c.WorkflowService()
	_, err = ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if _, ok := errors.AsType[*serviceerror.NamespaceNotFound](err); ok {
		_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
		})
		if _, exists := errors.AsType[*serviceerror.NamespaceAlreadyExists](err); err != nil && !exists {
			return nil, fmt.Errorf("register Temporal namespace %s: %w", namespace, err)
		}
		added = append(added, "namespace "+namespace)
	} else if err != nil {
		return nil, fmt.Errorf("describe Temporal namespace %s: %w", namespace, err)
	}
	// A new namespace accepts search attributes after the registry
	// refresh: try until it does.
	for {
		missing, mistyped, err := compare(ctx, c, namespace, want)
		if err == nil && len(mistyped) > 0 {
			return added, &NamespaceError{Namespace: namespace, Mistyped: mistyped}
		}
		if err == nil && len(missing) == 0 {
			return added, nil
		}
		if err == nil {
			req := &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: map[string]enumspb.IndexedValueType{}}
			for _, a := range missing {
				req.SearchAttributes[a.Name] = a.Type
			}
			if _, err = c.OperatorService().AddSearchAttributes(ctx, req); err == nil {
				for _, a := range missing {
					added = append(added, a.Name+" ("+a.TypeName()+")")
				}
				continue
			}
		}
		select {
		case <-ctx.Done():
			return added, fmt.Errorf("add search attributes to Temporal namespace %s: %w", namespace, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

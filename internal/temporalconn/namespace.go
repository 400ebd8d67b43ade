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
const HistoryRetention = delivery.DeadLetterWindowDefault + 24*time.Hour

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
// the one list `hookrelay dev`, Check, Setup, docs/operations.md and the compose
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
	fmt.Fprintf(&sb, "Temporal namespace %q%s lacks search attributes hookrelay sets: %s; ", e.Namespace, at, strings.Join(e.MissingSearchAttributes(), ", "))
	if len(e.Mistyped) > 0 {
		sb.WriteString("Temporal cannot change an attribute's type: remove those of another type, then create them (`hookrelay setup-temporal` creates what is missing):\n")
	} else {
		sb.WriteString("run `hookrelay setup-temporal`, or:\n")
	}
	for _, a := range e.Mistyped {
		fmt.Fprintf(&sb, "  temporal operator search-attribute remove --namespace %s --name %s\n", e.Namespace, a.Name)
	}
	for _, a := range slices.Concat(e.Missing, e.Mistyped) {
		sb.WriteString("  " + a.CreateCommand(e.Namespace) + "\n")
	}
	sb.WriteString("  (Temporal Cloud: add them in the Cloud UI, or with tcld namespace search-attributes add)\n")
	return strings.TrimSuffix(sb.String(), "\n")
}

// Summary is the error in one line (the API's readiness answer).
func (e *NamespaceError) Summary() string {
	if e.NotFound {
		return fmt.Sprintf("namespace %s does not exist: run hookrelay setup-temporal", e.Namespace)
	}
	return fmt.Sprintf("namespace %s lacks search attributes %s: run hookrelay setup-temporal", e.Namespace, strings.Join(e.MissingSearchAttributes(), ", "))
}

// UncheckedError is a namespace whose search attributes the caller may not
// list (a Temporal Cloud API key without that right): hookrelay starts,
// and a missing attribute shows when a workflow starts.
type UncheckedError struct {
	Namespace string
	Err       error
}

func (e *UncheckedError) Error() string {
	return "cannot check the search attributes of Temporal namespace " + e.Namespace + ": " + e.Err.Error()
}

func (e *UncheckedError) Unwrap() error { return e.Err }

// Check reports whether the namespace exists and has every attribute of
// Required with its type (a *NamespaceError otherwise; an *UncheckedError
// when the caller may not list them). address only names the cluster in
// the message.
func Check(ctx context.Context, c client.Client, address, namespace string) error {
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if _, ok := errors.AsType[*serviceerror.NamespaceNotFound](err); ok {
		return &NamespaceError{Address: address, Namespace: namespace, NotFound: true, Missing: Required()}
	}
	if err != nil {
		return fmt.Errorf("describe Temporal namespace %s: %w", namespace, err)
	}
	missing, mistyped, err := compare(ctx, c, namespace, Required())
	if _, denied := errors.AsType[*serviceerror.PermissionDenied](err); denied {
		return &UncheckedError{Namespace: namespace, Err: err}
	}
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

// notReadyYet reports whether err is a namespace that is not serving yet
// (just registered), which waiting cures; a refusal (PermissionDenied on
// Temporal Cloud or without operator rights) or a bad request is final.
func notReadyYet(err error) bool {
	_, notFound := errors.AsType[*serviceerror.NamespaceNotFound](err)
	_, unavailable := errors.AsType[*serviceerror.Unavailable](err)
	_, notReady := errors.AsType[*serviceerror.NamespaceUnavailable](err)
	return notFound || unavailable || notReady
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
		if !notReadyYet(err) {
			return added, fmt.Errorf("add search attributes to Temporal namespace %s: %w", namespace, err)
		}
		select {
		case <-ctx.Done():
			return added, fmt.Errorf("add search attributes to Temporal namespace %s: %w", namespace, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

package temporalconn_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"hookrelay/internal/temporalconn"
)

// fakeCluster answers the three calls Setup and Check make.
type fakeCluster struct {
	client.Client
	have   map[string]enumspb.IndexedValueType
	addErr error
	adds   int
}

type fakeWS struct {
	workflowservice.WorkflowServiceClient
}

type fakeOS struct {
	operatorservice.OperatorServiceClient
	*fakeCluster
}

func (f *fakeCluster) WorkflowService() workflowservice.WorkflowServiceClient { return fakeWS{} }
func (f *fakeCluster) OperatorService() operatorservice.OperatorServiceClient {
	return fakeOS{fakeCluster: f}
}
func (fakeWS) DescribeNamespace(context.Context, *workflowservice.DescribeNamespaceRequest, ...grpc.CallOption) (*workflowservice.DescribeNamespaceResponse, error) {
	return &workflowservice.DescribeNamespaceResponse{}, nil
}
func (f fakeOS) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: f.have}, nil
}
func (f fakeOS) AddSearchAttributes(context.Context, *operatorservice.AddSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.AddSearchAttributesResponse, error) {
	f.adds++
	return nil, f.addErr
}

// TestSetupFailsAtOnceWhenRefused: on Temporal Cloud (and on any cluster
// where the caller is not an operator) AddSearchAttributes answers
// PermissionDenied, which waiting does not cure: Setup fails at once.
func TestSetupFailsAtOnceWhenRefused(t *testing.T) {
	f := &fakeCluster{have: map[string]enumspb.IndexedValueType{}, addErr: serviceerror.NewPermissionDenied("Request unauthorized.", "")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := temporalconn.Setup(ctx, f, "prod.acct", temporalconn.HistoryRetention, temporalconn.Required())
	require.Error(t, err)
	require.ErrorAs(t, err, new(*serviceerror.PermissionDenied))
	require.Less(t, time.Since(start), time.Second, "a permanent refusal fails at once (took %s, %d AddSearchAttributes calls)", time.Since(start), f.adds)
}

// TestSetupOfAMistypedAttributeSaysToRemoveIt: an attribute under another
// type is something setup-temporal cannot fix, so its message does not send
// the operator back to it but to removing the attribute.
func TestSetupOfAMistypedAttributeSaysToRemoveIt(t *testing.T) {
	have := map[string]enumspb.IndexedValueType{}
	for _, a := range temporalconn.Required() {
		have[a.Name] = a.Type
	}
	have["HookrelayDeliveries"] = enumspb.INDEXED_VALUE_TYPE_KEYWORD // under another type
	_, err := temporalconn.Setup(context.Background(), &fakeCluster{have: have}, "prod", temporalconn.HistoryRetention, temporalconn.Required())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "run `hookrelay setup-temporal`", "the message of setup-temporal itself")
	require.Contains(t, err.Error(), "temporal operator search-attribute remove --namespace prod --name HookrelayDeliveries")
}

// TestConnectErrorFitsHowItTried: a refused TCP connection is blamed on the
// address, not on TLS settings; with an API key set the hint does not ask
// for one; the key itself never appears.
func TestConnectErrorFitsHowItTried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close() // nothing listens: connection refused
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const key = "sk-review-secret-api-key"
	_, err = temporalconn.Dial(ctx, temporalconn.Settings{Address: addr, Namespace: "n", APIKey: key}, nil)
	require.Error(t, err)
	msg := err.Error()
	t.Log(msg)
	require.NotContains(t, msg, key)
	var ce *temporalconn.ConnectError
	require.True(t, errors.As(err, &ce))
	require.False(t, strings.Contains(msg, "needs --temporal-api-key"), "the API key was set: %s", msg)
	require.Contains(t, msg, "nothing answers there")
	require.False(t, ce.Reachable)
}

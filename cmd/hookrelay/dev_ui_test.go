package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// uiHistory is a workflow's history as the Temporal Web UI's API serves it:
// each event's type, and the decoded text of every payload in it;
// previousRun is the run it continued (empty for a first run).
type uiHistory struct {
	types       []string
	text        string
	previousRun string
}

func (h uiHistory) has(typ string) bool {
	for _, t := range h.types {
		if t == typ {
			return true
		}
	}
	return false
}

func (h uiHistory) count(typ string) int {
	n := 0
	for _, t := range h.types {
		if t == typ {
			n++
		}
	}
	return n
}

// readUIHistory reads the history of workflow id's run runID (empty: its
// latest run) from the UI's API.
func readUIHistory(t *testing.T, ui, id, runID string) uiHistory {
	t.Helper()
	url := ui + "/api/v1/namespaces/default/workflows/" + id + "/history?maximumPageSize=1000"
	if runID != "" {
		url += "&execution.runId=" + runID
	}
	code, body := get(t, url, "")
	require.Equal(t, http.StatusOK, code, "the UI knows workflow %s: %s", id, body)
	var resp struct {
		History struct {
			Events []map[string]any `json:"events"`
		} `json:"history"`
	}
	require.NoError(t, json.Unmarshal(body, &resp))
	var h uiHistory
	var text strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if data, ok := x["data"].(string); ok {
				if raw, err := base64.StdEncoding.DecodeString(data); err == nil {
					text.Write(raw)
					text.WriteByte('\n')
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			text.WriteString(x)
			text.WriteByte('\n')
		}
	}
	for _, ev := range resp.History.Events {
		h.types = append(h.types, ev["eventType"].(string))
		if a, ok := ev["workflowExecutionStartedEventAttributes"].(map[string]any); ok {
			h.previousRun, _ = a["continuedExecutionRunId"].(string)
		}
		walk(ev)
	}
	h.text = text.String()
	return h
}

// TestDevStackShowsEveryDeliveryInTheUI: on a fresh `hookrelay dev` (the
// default first-attempt mode), the Temporal Web UI's API returns each
// delivery's DeliveryWorkflow by the delivery's ID: one answered 200 is a
// completed run whose history names SendSigned; one answered 400 is a
// parked dead letter whose history shows its attempt; its replay is a
// signal in that history, and the replayed cycle's success is recorded.
func TestDevStackShowsEveryDeliveryInTheUI(t *testing.T) {
	var fixed atomic.Bool
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bad") && !fixed.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer rc.Close()
	dataDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Chmod(filepath.Dir(dataDir), 0o755))
	p := startDev(t, dataDir, true)
	defer p.stop(t)
	raw, err := os.ReadFile(filepath.Join(dataDir, "admin-key"))
	require.NoError(t, err)
	key := strings.TrimSpace(string(raw))
	api, ui := "http://"+p.api, "http://"+p.ui
	call := func(method, path, body string, out any) int {
		t.Helper()
		req, err := http.NewRequest(method, api+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if out != nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
		}
		return resp.StatusCode
	}
	var app struct{ ID string }
	require.Equal(t, http.StatusCreated, call("POST", "/v1/apps", `{"name":"acme"}`, &app))
	for _, path := range []string{"ok", "bad"} {
		require.Equal(t, http.StatusCreated, call("POST", "/v1/apps/"+app.ID+"/endpoints",
			`{"url":"`+rc.URL+`/`+path+`","event_types":["payment.`+path+`"]}`, nil))
	}
	send := func(typ string) string {
		var ev struct {
			Deliveries []struct{ ID string } `json:"deliveries"`
		}
		require.Equal(t, http.StatusAccepted, call("POST", "/v1/apps/"+app.ID+"/events", `{"type":"`+typ+`","data":{"amount":9900}}`, &ev))
		require.Len(t, ev.Deliveries, 1)
		return ev.Deliveries[0].ID
	}
	waitStatus := func(id, want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			var d struct{ Status string }
			call("GET", "/v1/apps/"+app.ID+"/deliveries/"+id, "", &d)
			return d.Status == want
		}, 30*time.Second, 50*time.Millisecond, "delivery %s %s", id, want)
	}

	ok := send("payment.ok")
	waitStatus(ok, "succeeded")
	var h uiHistory
	require.Eventually(t, func() bool {
		h = readUIHistory(t, ui, ok, "")
		return h.has("EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED")
	}, 10*time.Second, 50*time.Millisecond, "a completed DeliveryWorkflow for the delivery that succeeded")
	require.Contains(t, h.text, "DeliveryWorkflow")
	require.Contains(t, h.text, "SendSigned", "its history names the attempt")

	bad := send("payment.bad")
	waitStatus(bad, "dead_lettered")
	h = readUIHistory(t, ui, bad, "")
	require.Contains(t, h.text, "SendSigned")
	require.Contains(t, h.text, "HTTP 400", "the attempt's answer is in the history")
	require.False(t, h.has("EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"), "a dead letter is parked, queryable")

	fixed.Store(true)
	require.Equal(t, http.StatusAccepted, call("POST", "/v1/apps/"+app.ID+"/deliveries/"+bad+"/replay", "", nil))
	waitStatus(bad, "succeeded")
	require.Eventually(t, func() bool {
		h = readUIHistory(t, ui, bad, "")
		return h.has("EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED")
	}, 10*time.Second, 50*time.Millisecond, "the replayed cycle runs as the delivery's next run, and completes")
	require.Contains(t, h.text, "SendSigned")
	require.NotEmpty(t, h.previousRun, "it continued the dead letter's run")
	parked := readUIHistory(t, ui, bad, h.previousRun)
	require.True(t, parked.has("EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"), "the replay is a signal in the dead letter's history")
	require.Contains(t, parked.text, "replay")
	require.True(t, parked.has("EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"))
}

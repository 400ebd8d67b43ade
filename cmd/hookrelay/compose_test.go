package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"hookrelay/internal/devstack"
)

// composeFile is what the compose test reads of docker-compose.yml.
type composeFile struct {
	Services map[string]struct {
		Image       string         `yaml:"image"`
		Build       string         `yaml:"build"`
		Command     []string       `yaml:"command"`
		Restart     string         `yaml:"restart"`
		Healthcheck map[string]any `yaml:"healthcheck"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
	Configs map[string]struct {
		Content string `yaml:"content"`
	} `yaml:"configs"`
}

// goModVersion is module's version in go.mod, without its "v".
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	mod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` v(\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, module)
	return string(m[1])
}

// TestComposeIsCurrent reads docker-compose.yml (Docker has no engine on
// the machines this is built on): no deprecated auto-setup image; the
// Temporal server and admin tools of the server version hookrelay is built
// with, the UI hookrelay dev embeds; setup-temporal, migrate and the schema
// job run once and api and worker wait for them; every long-running
// service restarts unless stopped and has a health check (the UI's image
// aside); every hookrelay command it runs exists; Temporal's timers are set
// as the embedded server sets them.
func TestComposeIsCurrent(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(raw, &c))
	server, ui := goModVersion(t, "go.temporal.io/server"), goModVersion(t, "github.com/temporalio/ui-server/v2")
	oneShot := []string{"migrate", "setup-temporal", "temporal-schema"}
	var ran []string
	for name, s := range c.Services {
		require.NotContains(t, s.Image, "auto-setup", name)
		switch {
		case strings.HasPrefix(s.Image, "temporalio/server:"), strings.HasPrefix(s.Image, "temporalio/admin-tools:"):
			require.True(t, strings.HasSuffix(s.Image, ":"+server), "%s: %s, go.mod has server %s", name, s.Image, server)
		case strings.HasPrefix(s.Image, "temporalio/ui:"):
			require.Equal(t, "temporalio/ui:"+ui, s.Image, name)
		}
		if slices.Contains(oneShot, name) {
			require.Equal(t, "no", s.Restart, name)
		} else {
			require.Equal(t, "unless-stopped", s.Restart, name)
			if !strings.HasPrefix(s.Image, "temporalio/ui:") {
				require.NotEmpty(t, s.Healthcheck, "%s has a health check", name)
			}
		}
		if s.Build != "" {
			require.NotEmpty(t, s.Command, name)
			ran = append(ran, s.Command[0])
			var out, errOut bytes.Buffer
			require.NotEqual(t, 2, run([]string{s.Command[0], "-h"}, nil, &out, &errOut), "%s runs `hookrelay %s`: %s", name, s.Command[0], errOut.String())
		}
		if hc, ok := s.Healthcheck["test"].([]any); ok && len(hc) > 2 && hc[1] == "hookrelay" {
			require.Equal(t, "probe", hc[2], name)
		}
	}
	require.ElementsMatch(t, []string{"setup-temporal", "migrate", "api", "worker"}, ran)
	for _, name := range []string{"api", "worker"} {
		for _, dep := range []string{"migrate", "setup-temporal"} {
			require.Equal(t, "service_completed_successfully", c.Services[name].DependsOn[dep].Condition, "%s waits for %s", name, dep)
		}
	}
	require.Equal(t, "service_completed_successfully", c.Services["temporal"].DependsOn["temporal-schema"].Condition)
	dyn := c.Configs["temporal-dynamic-config"].Content
	require.Contains(t, dyn, "history.timerProcessorMaxTimeShift:\n  - value: "+devstack.TimerShift.String())
	require.Contains(t, dyn, "history.timerProcessorMaxPollRPS:\n  - value: "+strconv.Itoa(devstack.TimerReadsPerSecond))
}

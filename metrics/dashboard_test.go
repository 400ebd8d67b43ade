package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"hookrelay/metrics"
)

// capture is a Registerer that keeps what is registered.
type capture struct{ collectors []prometheus.Collector }

func (c *capture) Register(x prometheus.Collector) error {
	c.collectors = append(c.collectors, x)
	return nil
}

func (c *capture) MustRegister(xs ...prometheus.Collector) {
	c.collectors = append(c.collectors, xs...)
}

func (c *capture) Unregister(prometheus.Collector) bool { return false }

// exported lists the series hookrelay registers, read from their
// descriptions (no database is read).
func exported(t *testing.T) map[string]bool {
	reg := &capture{}
	metrics.NewSender(reg, false)
	metrics.NewState(reg, nil)
	metrics.NewReceiver(reg, nil)
	descs := make(chan *prometheus.Desc, 100)
	for _, c := range reg.collectors {
		c.Describe(descs)
	}
	close(descs)
	out := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	require.Greater(t, len(out), 10)
	return out
}

// TestDashboardNamesExportedSeries: every series the Grafana dashboard
// queries is one hookrelay exports, and every exported series appears.
func TestDashboardNamesExportedSeries(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/hookrelay.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	have := exported(t)
	used := map[string]bool{}
	name := regexp.MustCompile(`hookrelay_[a-z_]+`)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				require.True(t, have[base], "panel %q queries %s, which hookrelay does not export", p.Title, n)
				used[base] = true
			}
		}
	}
	for n := range have {
		if strings.HasPrefix(n, metrics.Namespace+"_") && n != "hookrelay_state_scrape_failed" {
			require.True(t, used[n], "%s is on no panel", n)
		}
	}
}

package workflows

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// What the Temporal Web UI shows of a delivery: each workflow's static
// summary and details (set by its starter), each activity's summary (set
// when it is scheduled, before its result), and the workflow's current
// details (the last attempt's result line, kept current by the workflow).
// All of it is single-line Temporal Markdown, built from text a customer
// controls (app names, event types, endpoint hosts), so each piece goes
// through plain first.

// Size bounds of what the UI shows. Temporal limits user metadata payloads
// (limit.userMetadataSummarySize, 400 bytes, and
// limit.userMetadataDetailsSize, 20,000 bytes, where it checks them); the
// bounds leave room for the payload's encoding.
const (
	// summaryFieldMax bounds each customer-controlled piece of a summary,
	// in runes.
	summaryFieldMax = 80
	// reasonMax bounds an error or a dead-letter reason in details, in
	// runes.
	reasonMax = 400
	// summaryBytesMax bounds a summary, in bytes.
	summaryBytesMax = 340
	// detailsBytesMax bounds static and current details, in bytes.
	detailsBytesMax = 19000
)

// clip cuts s to at most n bytes, at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// plain makes s safe to put in a Temporal Markdown line: control
// characters become spaces, the characters that open links, HTML or code
// are escaped, and it is cut to summaryFieldMax runes.
func plain(s string) string { return plainMax(s, summaryFieldMax) }

// plainMax is plain cut to limit runes.
func plainMax(s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case unicode.IsControl(r):
			b.WriteByte(' ')
		case strings.ContainsRune("[]<>`\\", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// EndpointHost is the host (and port, when given) of an endpoint URL: what
// a summary names an endpoint by. The path and query are left out, since
// they may carry a receiver's token.
func EndpointHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

// endpointName is what summaries call in's endpoint: its host, or its ID
// in inputs recorded before Input.EndpointHost.
func endpointName(in Input) string {
	if in.EndpointHost != "" {
		return plain(in.EndpointHost)
	}
	return plain(in.EndpointID)
}

// DeliverySummary is a DeliveryWorkflow's static summary:
// "payment.succeeded → api.acme.com · app acme", with the cycle when it
// is a replay's.
func DeliverySummary(in Input) string {
	app := in.AppName
	if app == "" {
		app = in.AppID
	}
	s := plain(in.EventType) + " → " + endpointName(in) + " · app " + plain(app)
	if in.Cycle > 1 {
		s += fmt.Sprintf(" · replay (cycle %d)", in.Cycle)
	}
	return clip(s, summaryBytesMax)
}

// DeliveryDetails is a DeliveryWorkflow's static details: its IDs and
// retry settings as readable text.
func DeliveryDetails(in Input) string {
	set := in.Settings.WithDefaults()
	waits := make([]string, len(set.Schedule))
	for i, w := range set.Schedule {
		waits[i] = w.String()
	}
	lines := []string{
		"**Delivery** " + plain(in.DeliveryID) + " (cycle " + fmt.Sprint(max(in.Cycle, 1)) + ")",
		"**Event** " + plain(in.EventID) + " · " + plain(in.EventType),
		"**Endpoint** " + plain(in.EndpointID) + " · " + endpointName(in),
		"**App** " + plain(in.AppID) + nameSuffix(in.AppName),
		"**Schedule** " + strings.Join(waits, ", ") + fmt.Sprintf(" (%d attempts)", len(waits)),
		"**Deadline** " + set.Deadline.String() + deadlineAt(in.AcceptedAt, set.Deadline),
		"**Request timeout** " + set.RequestTimeout.String(),
		"**Dead letters kept** " + set.Retention.String(),
	}
	if in.Resume != nil {
		lines = append(lines, "**First attempt** made before this workflow: "+resultLine(endpointName(in), 1, in.Resume.Result, in.Resume.Err()))
	}
	return clip(strings.Join(lines, "\n\n"), detailsBytesMax)
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " · " + plain(name)
}

func deadlineAt(accepted time.Time, deadline time.Duration) string {
	if accepted.IsZero() {
		return " from the run's start"
	}
	return " (until " + accepted.Add(deadline).UTC().Format(time.RFC3339) + ")"
}

// CarrierSummary is a CarrierWorkflow's static summary.
func CarrierSummary(in CarrierInput) string {
	if len(in.Deliveries) == 1 {
		return "carrier: 1 first attempt"
	}
	return fmt.Sprintf("carrier: %d first attempts", len(in.Deliveries))
}

// CarrierDetails is a CarrierWorkflow's static details: one line per
// delivery it carries.
func CarrierDetails(in CarrierInput) string {
	lines := make([]string, len(in.Deliveries))
	for i, d := range in.Deliveries {
		lines[i] = plain(d.DeliveryID) + ": " + DeliverySummary(d)
	}
	return clip(strings.Join(lines, "\n\n"), detailsBytesMax)
}

// sendSummary is a SendSigned activity's summary, known when it is
// scheduled: "POST api.acme.com (attempt 3)".
func sendSummary(in Input, cycle, number int) string {
	s := fmt.Sprintf("POST %s (attempt %d", endpointName(in), number)
	if cycle > 1 {
		s += fmt.Sprintf(", cycle %d", cycle)
	}
	return clip(s+")", summaryBytesMax)
}

// heldSummary names the wait of attempt number, held for class.
func heldSummary(class delivery.Class, number int, wait time.Duration) string {
	switch class {
	case delivery.ClassRateLimited:
		return fmt.Sprintf("rate limit: attempt %d waits %s for its slot", number, wait)
	case delivery.ClassEndpointBusy:
		return fmt.Sprintf("endpoint busy: attempt %d again in %s", number, wait)
	}
	return fmt.Sprintf("endpoint paused: attempt %d again in %s", number, wait)
}

// groupSummary is a SendGroup activity's summary.
func groupSummary(n int) string {
	return fmt.Sprintf("POST %d first attempts", n)
}

// markSummary is a MarkDelivery activity's summary.
func markSummary(status delivery.Status, reason string) string {
	s := "record " + string(status)
	if reason != "" {
		s += ": " + plainMax(reason, reasonMax)
	}
	return clip(s, summaryBytesMax)
}

// resultLine is attempt number's result as a line:
// "attempt 3: POST api.acme.com → 503 in 212 ms (retryable)". err is the
// activity's failure, when it did not complete.
func resultLine(endpoint string, number int, res attempt.SendResult, err error) string {
	if err != nil {
		return fmt.Sprintf("attempt %d: POST %s did not complete: %s", number, endpoint, plainMax(err.Error(), reasonMax))
	}
	s := fmt.Sprintf("attempt %d: POST %s → ", number, endpoint)
	switch {
	case res.Class.Held():
		return s + "nothing sent (" + string(res.Class) + ")"
	case res.StatusCode > 0:
		s += fmt.Sprint(res.StatusCode)
	default:
		s += "no response"
	}
	s += fmt.Sprintf(" in %d ms (%s)", res.DurationMS, res.Class)
	if res.Error != "" && res.Class != delivery.ClassSuccess {
		s += ": " + plainMax(res.Error, reasonMax)
	}
	return s
}

// showDetails sets the workflow's current details (shown in the Temporal
// UI beside its summary): the status, the last attempt's result and when
// the next is due. It issues no command, so histories replay unchanged.
func (r *run) showDetails(ctx workflow.Context) {
	parts := []string{fmt.Sprintf("**%s** · cycle %d · %d attempts", r.state.Status, r.state.Cycle, r.state.AttemptCount)}
	if r.lastLine != "" {
		parts = append(parts, "last: "+r.lastLine)
	}
	if at := r.state.NextAttemptAt; at != nil {
		parts = append(parts, "next at "+at.UTC().Format(time.RFC3339))
	}
	if r.state.DeadLetterReason != "" {
		parts = append(parts, "dead letter: "+plainMax(r.state.DeadLetterReason, reasonMax))
	}
	s := strings.Join(parts, " · ")
	if r.in.Cycle > 1 || r.in.Progress != nil {
		// A run continued as new has no static summary (the SDK sets none
		// on continue-as-new): its details say what it delivers.
		s = DeliverySummary(r.in) + "\n\n" + s
	}
	workflow.SetCurrentDetails(ctx, clip(s, detailsBytesMax))
}

// attempted notes attempt number's result for showDetails.
func (r *run) attempted(ctx workflow.Context, number int, res attempt.SendResult, err error) {
	r.lastLine = resultLine(endpointName(r.in), number, res, err)
	r.showDetails(ctx)
}

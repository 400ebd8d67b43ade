package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// modelRuns is how many random interleavings TestModel plays.
const modelRuns = 2000

// modelAnswers are the attempt answers the model draws from.
var modelAnswers = []string{"2xx", "4xx", "410", "429", "429-hint", "5xx", "timeout", "activity-error", "busy", "paused", "rate-limited"}

// model is one random run: the answers SendSigned gives, when signals
// arrive, and what the workflow did.
type model struct {
	rng     *rand.Rand
	env     *testsuite.TestWorkflowEnvironment
	start   time.Time
	sends   []time.Time // workflow time of each SendSigned call
	answers []string
	// recorded counts answers that are attempts (a request was sent).
	recorded  int
	lastFinal string // the last recorded answer
	canceled  time.Time
	marks     []delivery.Status
	// unrecorded counts answers sent back as not recorded (their activity's
	// record failed) that the run has not yet recorded itself; early says a
	// request started while one was.
	unrecorded int
	early      bool
}

func (m *model) send(_ context.Context, req activities.SendRequest) (activities.SendResult, error) {
	now := m.env.Now()
	if m.unrecorded > 0 {
		m.early = true
	}
	m.sends = append(m.sends, now)
	m.env.SetCurrentHistoryLength(len(m.sends) * 6)
	a := modelAnswers[m.rng.IntN(len(modelAnswers))]
	m.answers = append(m.answers, a)
	res := activities.SendResult{Number: req.Number, StartedAt: now}
	switch a {
	case "activity-error":
		return res, errors.New("worker died")
	case "busy":
		res.Class = activities.ClassEndpointBusy
		return res, nil
	case "paused":
		res.Class = activities.ClassEndpointPaused
		return res, nil
	case "rate-limited":
		res.Class, res.SlotAt = activities.ClassRateLimited, now.Add(2*time.Second)
		return res, nil
	case "2xx":
		res.StatusCode = 200
	case "4xx":
		res.StatusCode = 404
	case "410":
		res.StatusCode = 410
	case "429", "429-hint":
		res.StatusCode = 429
		res.HasRetryAfter, res.RetryAfter = a == "429-hint", 90*time.Second
	case "5xx":
		res.StatusCode = 503
	case "timeout":
		res.Class, res.Error = activities.ClassRetryable, "timeout"
	}
	if res.StatusCode != 0 {
		res.Class = activities.ClassifyStatus(res.StatusCode)
	}
	m.recorded++
	m.lastFinal = a
	if m.rng.IntN(4) == 0 {
		// Sent, but Postgres refused its record past the activity's retries.
		res.Unrecorded = true
		m.unrecorded++
	}
	return res, nil
}

// recordLate is RecordLate: Postgres refuses one record in three.
func (m *model) recordLate(_ context.Context, _ activities.SendRequest, res activities.SendResult) error {
	if m.rng.IntN(3) == 0 {
		return errors.New("connection refused")
	}
	if res.Unrecorded {
		m.unrecorded--
	}
	return nil
}

func (m *model) mark(_ context.Context, req activities.MarkRequest) (activities.MarkResult, error) {
	m.marks = append(m.marks, req.Status)
	return activities.MarkResult{Status: req.Status}, nil
}

// TestModel plays modelRuns random interleavings of attempt answers
// (2xx, 4xx, 410, 429 with and without a hint, 5xx, timeout, an activity
// error after the request, busy, paused, rate-limited; one sent answer in
// four unrecorded by its activity, its late record refused one time in
// three) and signals (cancel, replay) against DeliveryWorkflow, and checks
// after each run:
//   - the attempts the run holds equal the requests the model answered;
//   - every unrecorded answer is recorded by the run before its next
//     request (and before the run ends);
//   - the final status follows the last recorded answer (2xx: succeeded;
//     4xx or 410: dead_lettered; a cancel: canceled unless a 2xx came);
//   - no request starts after a cancel reached the run;
//   - every run ends (completes, parks until its retention or continues as
//     new) within its deadline plus the retention;
//   - a run's history stays under HistoryBound plus one hold's events.
//
// A failure names the seed; MODEL_SEED=n plays that seed alone.
func TestModel(t *testing.T) {
	t.Parallel()
	first, last := uint64(1), uint64(modelRuns)
	if v := os.Getenv("MODEL_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MODEL_SEED: %v", err)
		}
		first, last = n, n
	}
	for seed := first; seed <= last; seed++ {
		if !playModel(t, seed) {
			t.Fatalf("model failed; reproduce with seed %d", seed)
		}
	}
}

func playModel(t *testing.T, seed uint64) bool {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	m := &model{rng: rand.New(rand.NewPCG(seed, 0)), env: env, start: env.Now()}
	var a *activities.Activities
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.SendSigned, mock.Anything, mock.Anything).Return(m.send)
	env.OnActivity(a.MarkDelivery, mock.Anything, mock.Anything).Return(m.mark)
	env.OnActivity(a.RecordLate, mock.Anything, mock.Anything, mock.Anything).Return(m.recordLate)
	env.RegisterWorkflow(workflows.DeliveryWorkflow)
	set := delivery.Settings{
		Schedule: []time.Duration{0, time.Second, 5 * time.Second, time.Minute, 10 * time.Minute, time.Hour}[:1+m.rng.IntN(6)],
		Deadline: []time.Duration{30 * time.Second, 10 * time.Minute, 3 * time.Hour}[m.rng.IntN(3)], RequestTimeout: 5 * time.Second,
		Retention: 24 * time.Hour,
	}
	in := workflows.Input{DeliveryID: fmt.Sprintf("dlv_model_%d", seed), EndpointID: "ep_1", AppID: "app_1", EventType: "t", Settings: set}
	if m.rng.IntN(3) == 0 {
		at := time.Duration(m.rng.Int64N(int64(set.Deadline)))
		env.RegisterDelayedCallback(func() {
			m.canceled = env.Now()
			env.SignalWorkflow(workflows.SignalCancel, nil)
		}, at)
	}
	if m.rng.IntN(3) == 0 {
		at := time.Duration(m.rng.Int64N(int64(2 * set.Deadline)))
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "model", ReplayID: 5})
		}, at)
	}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	fail := func(format string, args ...any) bool {
		t.Logf("seed %d: "+format+" (schedule %v, deadline %s, answers %v, marks %v)",
			append([]any{seed}, append(args, set.Schedule, set.Deadline, m.answers, m.marks)...)...)
		return false
	}
	if !env.IsWorkflowCompleted() {
		return fail("the run did not end")
	}
	if m.early || m.unrecorded != 0 {
		return fail("a sent attempt was not recorded before the run went on (%d left unrecorded, sent early: %v)", m.unrecorded, m.early)
	}
	var st workflows.State
	var can *workflow.ContinueAsNewError
	err := env.GetWorkflowError()
	switch {
	case errors.As(err, &can):
		// A replay's cycle or a bounded hold goes on in a new run: this
		// run's record is in Postgres, its state is not returned.
		if len(m.sends)*6 > workflows.HistoryBound+6*2 {
			return fail("%d sends in one run passed the history bound", len(m.sends))
		}
		return true
	case err != nil:
		return fail("run failed: %v", err)
	}
	if err := env.GetWorkflowResult(&st); err != nil {
		return fail("result: %v", err)
	}
	if st.AttemptCount != m.recorded {
		return fail("state holds %d attempts, the model answered %d requests", st.AttemptCount, m.recorded)
	}
	if !m.canceled.IsZero() {
		for _, at := range m.sends {
			if at.After(m.canceled) {
				return fail("a request at %s after the cancel at %s", at.Sub(m.start), m.canceled.Sub(m.start))
			}
		}
	}
	switch {
	case m.lastFinal == "2xx" && st.Status != delivery.StatusSucceeded:
		return fail("last answer 2xx, status %s", st.Status)
	case (m.lastFinal == "4xx" || m.lastFinal == "410") && st.Status != delivery.StatusDeadLettered && st.Status != delivery.StatusCanceled:
		return fail("last answer %s, status %s", m.lastFinal, st.Status)
	case st.Status == delivery.StatusSucceeded && m.lastFinal != "2xx":
		return fail("succeeded without a 2xx (last %q)", m.lastFinal)
	case st.Status == delivery.StatusCanceled && m.canceled.IsZero():
		return fail("canceled with no cancel")
	}
	if end := env.Now().Sub(m.start); end > set.Deadline+set.Retention+time.Minute {
		return fail("ended after %s, past deadline %s plus retention", end, set.Deadline)
	}
	return true
}

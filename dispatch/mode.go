package dispatch

// Mode is how a dispatcher has first attempts made (config.FirstAttempts).
type Mode string

// Modes (config.FirstAttempts* name the same).
const (
	// ModeWorkflow, the default: every new delivery's DeliveryWorkflow
	// makes its first attempt. Its row waits in the outbox (held by the
	// dispatcher, up to HoldMax) for the first wait, and the run starts,
	// eagerly on this worker, when the attempt is due: no timer, and for
	// an endpoint that answers fast (activities.LocalFirsts) the attempt
	// is a local activity in the run's first task.
	ModeWorkflow Mode = "workflow"
	// ModeSender makes first attempts straight from the outbox (see
	// first.go); only a delivery whose first attempt did not succeed gets
	// a workflow.
	ModeSender Mode = "sender"
	// ModeCarrier carries first attempts many to a CarrierWorkflow.
	ModeCarrier Mode = "carrier"
)

// SetMode has first attempts made in mode from the next round on (the
// bench measures every mode on one server).
func (d *Dispatcher) SetMode(mode Mode) { d.mode.Store(&mode) }

// current is the mode in use: SetMode's, else Mode's; ModeCarrier with no
// Sender.
func (d *Dispatcher) current() Mode {
	m := d.Mode
	if p := d.mode.Load(); p != nil {
		m = *p
	}
	switch {
	case d.Sender == nil:
		return ModeCarrier
	case m == "":
		return ModeWorkflow
	}
	return m
}

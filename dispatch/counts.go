package dispatch

import "hookrelay/workflows"

// SetCarrierSize changes CarrierSize while the dispatcher runs (the bench
// measures both shapes on one server).
func (d *Dispatcher) SetCarrierSize(n int) {
	d.carrierSize.Store(int64(min(max(n, 1), workflows.CarrierSizeMax)))
}

// Counts returns how many new deliveries were started in their own
// DeliveryWorkflow, how many in carriers, and how many first attempts a
// sender made (direct) since the dispatcher began.
func (d *Dispatcher) Counts() (own, carried, direct int64) {
	return d.started.Load(), d.carried.Load(), d.firstDone.Load() + d.firstHandedOff.Load()
}

// Local returns how many deliveries were started with a local first
// attempt (workflows.Input.FirstLocal) since the dispatcher began.
func (d *Dispatcher) Local() int64 { return d.local.Load() }

// Held returns how many times a start row was left in the outbox, leased
// until its recheck, since the dispatcher began: its first attempt held
// back (a share in use, its endpoint not answering), or its failed first
// attempt's hand-off (the endpoint not answering; with no answer, until
// before its retry). A hold is counted once its lease is written.
func (d *Dispatcher) Held() int64 { return d.firstHeld.Load() }

// Taken returns how many start rows an ingest handed to the sender (see
// Take) since the dispatcher began: no round came between their commit
// and the sender (one the sender then holds back, its app's share in use,
// goes to a round). Metrics.Handoffs counts the same, for Prometheus.
func (d *Dispatcher) Taken() int64 { return d.taken.Load() }

package dispatch

import (
	"time"

	"hookrelay/workflows"
)

// Dispatcher defaults.
const (
	BatchDefault = 200
	// PollIntervalDefault bounds how long a row can wait when its NOTIFY
	// was skipped or lost.
	PollIntervalDefault = 250 * time.Millisecond
	// CarrierSizeDefault is the most first attempts one carrier workflow
	// takes (at most workflows.CarrierSizeMax).
	CarrierSizeDefault = workflows.CarrierSizeMax
	// CarrierMinDefault is the fewest new deliveries a round must find to
	// carry them; a round with fewer starts one DeliveryWorkflow each.
	CarrierMinDefault = 2
	// linger is how long after a round that claimed rows the dispatcher
	// looks for the earliest row left: ingest wakes the dispatcher only
	// when no unleased row would be claimed before its own, so a row whose
	// ingest overlapped the round (and saw its rows still unleased) is
	// found by that look instead of waiting for the poll. A look, not a
	// round: at everyday rates a round per event would cost a claim
	// statement per event. A NOTIFY during the linger for a round due
	// now is served at once, and so is a Wake: an API in this process
	// asks for that round itself once such rows committed; the look finds
	// other processes' rows.
	linger = 10 * time.Millisecond
	// lingerLoaded is how many rows a round claims when ingest is fast
	// enough that waiting out the whole linger costs each row less than
	// the claim statement a round per few rows would: after such a round,
	// nothing asked meanwhile cuts the linger short (at full speed a Wake
	// per ingest would, and rounds of two or three rows cost throughput).
	lingerLoaded = 8
	// AppHeldShare is how many apps' worth of held rows HeldMax holds:
	// an app holds at most HeldMax / AppHeldShare (AppHeldMax), so it
	// takes that many flooding apps at once to fill HeldMax.
	AppHeldShare = 8
	// appFullWait is how long a start row of an app holding AppHeldMax
	// rows stays leased in the outbox, not held, before a round takes it
	// again.
	appFullWait = 100 * time.Millisecond
	// heldWait is how often a dispatcher whose sender holds HeldMax rows
	// looks again.
	heldWait = 10 * time.Millisecond
	// startConcurrency bounds concurrent workflow starts per batch.
	startConcurrency = 32
	// HeldSweepInterval is how often a dispatcher releases held rows of
	// endpoints no longer paused (store.ReleaseHeld): rows an ingest
	// that overlapped a resume wrote held.
	HeldSweepInterval = 10 * time.Second
)

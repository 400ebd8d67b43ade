package config

// Ways of making first attempts (Config.FirstAttempts).
const (
	// FirstAttemptsWorkflow, the default, gives every delivery its own
	// DeliveryWorkflow, which makes the first attempt through SendSigned:
	// every delivery's history is in Temporal.
	FirstAttemptsWorkflow = "workflow"
	// FirstAttemptsSender makes them straight from the outbox; only a
	// delivery whose first attempt did not succeed gets a workflow.
	FirstAttemptsSender = "sender"
	// FirstAttemptsCarrier carries them many to a CarrierWorkflow.
	FirstAttemptsCarrier = "carrier"
)

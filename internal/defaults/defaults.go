// Package defaults gathers the defaults of the settings each component owns
// (the API's limits, the dispatcher's batches, the store's retention, the
// worker's concurrency) into a config.Config, the base config.Load applies
// them from: config itself imports no component, so a package that reads
// the configuration (the embedded Temporal server's, say) does not link
// them.
package defaults

import (
	"hookrelay/activities"
	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/dispatch"
	"hookrelay/store"
	"hookrelay/worker"
)

// Components is a config.Config holding every component-owned default.
func Components() config.Config {
	return config.Config{
		DispatchBatch:         dispatch.BatchDefault,
		CarrierSize:           dispatch.CarrierSizeDefault,
		CarrierMin:            dispatch.CarrierMinDefault,
		EndpointShare:         activities.EndpointShareDefault,
		BreakerMisses:         activities.BreakerMissesDefault,
		IngestRate:            api.IngestRateDefault,
		IngestBurst:           api.IngestBurstDefault,
		HTTPHeaderTimeout:     api.HeaderTimeoutDefault,
		AuthFailuresPerMinute: api.AuthFailuresPerMinuteDefault,
		WorkerConcurrency:     worker.MaxConcurrentActivitiesDefault,
		Retention:             store.RetentionDefault,
		FailingAfter:          store.FailingAfterDefault,
		AutoDisableAfter:      store.AutoDisableAfterDefault,
		ReceiverTraces:        string(delivery.TraceContextDefault),
	}
}

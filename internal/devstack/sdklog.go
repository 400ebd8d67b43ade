package devstack

// quietSDKLogger drops the SDK client's own logs during namespace setup,
// where retries are expected.
type quietSDKLogger struct{}

func (quietSDKLogger) Debug(string, ...any) {}
func (quietSDKLogger) Info(string, ...any)  {}
func (quietSDKLogger) Warn(string, ...any)  {}
func (quietSDKLogger) Error(string, ...any) {}

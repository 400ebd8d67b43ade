// Package browser starts the headless Chromium the portal's browser tests
// drive (Debian's chromium package, installed by scripts/ensure-chromium),
// through chromedp.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path finds Chromium: $HOOKRELAY_CHROMIUM, else chromium or
// chromium-browser on PATH.
func Path() (string, error) {
	if p := os.Getenv("HOOKRELAY_CHROMIUM"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		p, err = exec.LookPath("chromium-browser")
	}
	return p, err
}

// TestTimeout bounds one browser test's whole run.
const TestTimeout = 3 * time.Minute

// New starts a headless Chromium for tb, closed when tb ends, and returns
// the context to run chromedp actions in. TLS errors are ignored (tests
// serve the portal over a test server's self-signed TLS to exercise Secure
// cookies), frames of other sites stay in the page's process (so a test
// can read a framed portal), and nothing reaches the network besides what
// the test serves. A missing Chromium fails the test: `make test` installs
// it.
func New(tb testing.TB) context.Context {
	tb.Helper()
	path, err := Path()
	if err != nil {
		tb.Fatalf("browser: Chromium not found (run scripts/ensure-chromium, or set HOOKRELAY_CHROMIUM): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // sessions and CI run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(filepath.Join(tb.TempDir(), "chromium")),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.Flag("disable-features", "IsolateOrigins,site-per-process,Translate,MediaRouter"),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), TestTimeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(tb.Logf))
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
		tb.Fatalf("browser: start %s: %v", path, err)
	}
	tb.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	return bctx
}

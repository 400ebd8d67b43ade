# hookrelay: `make dev` runs the whole product, `make test` runs every test.
GO ?= go

.PHONY: dev test unit fuzz build vet postgres chromium

# The PostgreSQL server binaries for the private cluster (installed from the
# system's packages when missing).
postgres:
	@scripts/ensure-postgres

# Debian's Chromium, which the portal's browser tests drive (installed when
# missing).
chromium:
	@scripts/ensure-chromium

# Builds and runs the binary itself, so Ctrl-C reaches hookrelay, which
# shuts down cleanly and exits 0.
dev: postgres build
	exec ./bin/hookrelay dev

build:
	$(GO) build -o bin/hookrelay ./cmd/hookrelay

vet:
	$(GO) vet ./...

# Packages that link the embedded Temporal server: dominated by it, they
# run without the race detector (its build of the server alone takes
# minutes on 2 cores). Every other package runs with -race.
SERVER_PKGS = integration cmd/hookrelay internal/bench internal/app internal/devstack

# Unit and integration tests: integration tests start a private Postgres
# (or use HOOKRELAY_DATABASE_URL) and an embedded Temporal server; the
# portal's tests drive a headless Chromium.
test: postgres chromium vet
	$(GO) test -count=1 -race -timeout 15m $$($(GO) list ./... | grep -v -x $(foreach p,$(SERVER_PKGS),-e hookrelay/$(p)))
	$(GO) test -count=1 -timeout 30m $(addprefix ./,$(SERVER_PKGS))
	$(MAKE) fuzz

# Short fuzzing of the parsers that face the network, each bounded by a
# count of executions (about 10 s each on the 2-core machines here), not by
# time: with Go 1.26 a -fuzztime duration can end in a spurious "context
# deadline exceeded" failure (go.dev/issue/75804, fixed in Go 1.27).
FUZZ_VERIFY ?= 100000x
FUZZ_RETRY_AFTER ?= 80000x
FUZZ_INGEST ?= 8000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZ_VERIFY) -timeout 5m ./webhook
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime $(FUZZ_RETRY_AFTER) -timeout 5m ./activities
	$(GO) test -run '^$$' -fuzz '^FuzzIngest$$' -fuzztime $(FUZZ_INGEST) -timeout 5m ./api

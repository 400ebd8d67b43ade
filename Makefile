# hookrelay: `make dev` runs the whole product, `make test` runs every test.
GO ?= go
FUZZTIME ?= 10s

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

# Short, fixed-time fuzzing of the parsers that face the network.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./webhook
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime $(FUZZTIME) ./activities
	$(GO) test -run '^$$' -fuzz '^FuzzIngest$$' -fuzztime $(FUZZTIME) ./api

# hookrelay: `make dev` runs the whole product, `make test` runs every test.
GO ?= go
FUZZTIME ?= 10s

.PHONY: dev test unit fuzz build vet

dev:
	$(GO) run ./cmd/hookrelay dev

build:
	$(GO) build -o bin/hookrelay ./cmd/hookrelay

vet:
	$(GO) vet ./...

# Unit and integration tests: integration tests start a private Postgres
# (or use HOOKRELAY_DATABASE_URL) and an embedded Temporal server.
test: vet
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz

# Short, fixed-time fuzzing of the parsers that face the network.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./webhook
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime $(FUZZTIME) ./activities
	$(GO) test -run '^$$' -fuzz '^FuzzIngestJSON$$' -fuzztime $(FUZZTIME) ./api

# Corral's everyday commands. `make test` is what CI runs.
GO ?= go
PKGS := ./...

.PHONY: run demo testdeps test fuzz-ci bench bench-micro soak agents lint fuzz helm-template

run: ## serve with CORRAL_* from the environment
	$(GO) run ./cmd/gateway

demo: ## serve the built-in mock model with a demo key
	$(GO) run ./cmd/gateway -demo

testdeps: ## install redis-server and chromium when missing (as root with apt-get), else stop with the command that does
	./tools/testdeps.sh

# CORRAL_TEST_STRICT=1: a test whose redis-server or chromium is missing
# fails rather than skips (internal/testdeps), so a green run ran them all.
test: testdeps ## vet, race-enabled tests, then every benchmark once so they stay runnable; nothing skipped for a missing redis-server or chromium
	$(GO) vet $(PKGS)
	CORRAL_TEST_STRICT=1 $(GO) test -race -count=1 -timeout 10m $(PKGS)
	CORRAL_TEST_STRICT=1 $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 5m $(PKGS)

fuzz-ci: ## 5 s of fuzzing whole bodies through the handler; .ci/run runs it after make test
	$(GO) test -run '^$$' -fuzz '^FuzzHandler$$' -fuzztime 5s ./internal/server/

bench: ## load harness (cmd/corralbench, internal/bench): gateway, mock, Redis and a bare proxy as pinned processes; ~4 min; BENCHFLAGS=-quick for ~1 min
	$(GO) run ./cmd/corralbench $(BENCHFLAGS)

soak: ## soak run (cmd/corralsoak): minutes of mixed traffic and faults through 3 gateways on a restarted Redis; RSS, goroutines, sockets before and after; not in test or CI; SOAKFLAGS=-d 10m
	$(GO) run ./cmd/corralsoak $(SOAKFLAGS)

agents: ## the real Codex CLI and Claude Code against a demo gateway (cmd/corralagents); installs both from npm (~660 MB) into the user cache dir; not in test or CI; AGENTSFLAGS=-record internal/server/testdata/agents
	$(GO) run ./cmd/corralagents $(AGENTSFLAGS)

bench-micro: ## go test micro benchmarks with allocations
	$(GO) test -run '^$$' -bench . -benchmem -timeout 15m $(PKGS)

lint:
	$(GO) vet $(PKGS)
	test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)

fuzz: ## a short fuzz run of the keying canonicaliser and of whole bodies through the handler
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./internal/keying/
	$(GO) test -run '^$$' -fuzz FuzzHandler -fuzztime 60s ./internal/server/

helm-template: ## render the Helm chart with the example values (Helm pinned in tools/helm)
	$(GO) -C tools/helm tool helm lint --strict ../../deploy/helm/corral -f ../../deploy/helm/corral/values-example.yaml
	$(GO) -C tools/helm tool helm template corral ../../deploy/helm/corral -f ../../deploy/helm/corral/values-example.yaml

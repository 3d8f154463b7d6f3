# farm: `make demo` and `make test` work from a fresh clone on Debian.
SHELL := /bin/bash
.DEFAULT_GOAL := help
STAMP := node_modules/.farm-installed

.PHONY: help deps system-deps build proto proto-check migrations-check lint test demo bench schema clean

help:
	@echo "make demo   - start two simulated phones and farm standalone, list them"
	@echo "make test   - install what is missing, build, run every test"
	@echo "make bench  - run the benchmarks in test/bench"
	@echo "make proto  - regenerate code from proto/ after a schema change"

system-deps:
	@scripts/install-system-deps.sh

$(STAMP): package-lock.json package.json */package.json
	npm ci --no-audit --no-fund
	@touch $(STAMP)

deps: system-deps $(STAMP)

build: deps
	npx tsc -b
	npm run build --silent -w dashboard

proto: deps
	npx buf lint
	npx buf generate

proto-check: deps
	@scripts/check-proto.sh

migrations-check: deps
	@scripts/check-migrations.sh

# Type-aware: reads the built declarations of the packages it imports.
lint: build
	npx eslint agent/src coordinator/src cli/src shared/src test

test: build proto-check migrations-check lint
	npx vitest run

demo: build
	node test/dist/demo/main.js

bench: build
	node test/dist/bench/coordinator-load.js
	node test/dist/bench/ownership-cost.js
	node test/dist/bench/evidence-capture.js
	node test/dist/bench/devsim-pull.js
	node test/dist/bench/lease-cycles.js
	node test/dist/bench/routing-overhead.js
	node test/dist/bench/video-verify.js
	node test/dist/bench/dashboard-devices.js
	node test/dist/bench/app-endpoint.js

schema: build
	node test/dist/support/write-manifest-schema.js

clean:
	npx tsc -b --clean

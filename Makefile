# farm: `make demo` and `make test` work from a fresh clone on Debian.
SHELL := /bin/bash
.DEFAULT_GOAL := help
STAMP := node_modules/.farm-installed

.PHONY: help deps system-deps build bundle pack install uninstall proto proto-check migrations-check lint format test e2e test-all demo bench schema clean

# `make install` puts `farm` in $(PREFIX)/bin: /usr/local as root, else ~/.local.
PREFIX ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)

help:
	@echo "make demo   - start two simulated phones and farm standalone, list them"
	@echo "make test   - install what is missing, build, run the checks and the unit tier (docs/testing.md)"
	@echo "make e2e    - build, run the e2e tier: real coordinators, agents, adb and Chromium over loopback"
	@echo "make test-all - the checks and both tiers in one run, as CI runs them"
	@echo "make format - format the code (dprint); make lint checks it"
	@echo "make bench  - run the benchmarks in test/bench"
	@echo "make proto  - regenerate code from proto/ after a schema change"
	@echo "make pack   - cli/bundle/farm-cli-VERSION.tgz (npm install -g it on lab hosts, docs/operations/install.md) and client/bundle/farm-client-VERSION.tgz (the @farm/client library)"
	@echo "make install [PREFIX=...] - npm install -g that CLI tarball into PREFIX (default /usr/local as root, else ~/.local)"

system-deps:
	@scripts/install-system-deps.sh

# Most of a clean `npm ci` here is compiling better-sqlite3's sqlite3.c (one file,
# -O3, on one core: its binding waits for it, so node-gyp's JOBS does not help).
# So npm ci only unpacks, and the packages' install scripts (the natives) run
# after it: in `make build` beside tsc (scripts/build.sh), else here.
PENDING := node_modules/.farm-natives-pending
$(STAMP): package-lock.json package.json */package.json
	npm ci --no-audit --no-fund --ignore-scripts
	@touch $(PENDING) $(STAMP)

deps: system-deps $(STAMP)
	@if [ -f $(PENDING) ]; then npm rebuild --no-audit --no-fund && rm -f $(PENDING); fi

# tsc, the dashboard, the CLI bundle (cli/bundle/package, esbuild; about a
# second) and the natives still to build, side by side where they can be.
build: system-deps $(STAMP)
	@scripts/build.sh

bundle: build

# The one install story (docs/operations/install.md): a self-contained tarball
# (the natives this checkout built ride inside it) for `npm install -g`.
pack: build
	rm -f cli/bundle/farm-cli-*.tgz
	node scripts/pack-cli.mjs >/dev/null
	node scripts/pack-client.mjs --quiet

# The same tarball, installed the same way: $(PREFIX)/lib/node_modules/@farm/cli, $(PREFIX)/bin/farm.
# An install by an older `make install` ($(PREFIX)/lib/farm) is removed first.
install: pack uninstall-legacy
	npm install -g --offline --no-audit --no-fund --prefix "$(PREFIX)" cli/bundle/farm-cli-*.tgz

uninstall: uninstall-legacy
	npm uninstall -g --no-audit --no-fund --prefix "$(PREFIX)" @farm/cli

.PHONY: uninstall-legacy
uninstall-legacy:
	@if [ -L "$(PREFIX)/bin/farm" ] && case "$$(readlink "$(PREFIX)/bin/farm")" in ../lib/farm/lib/*) true;; *) false;; esac; then \
	  rm -f "$(PREFIX)/bin/farm" && rm -rf "$(PREFIX)/lib/farm" && echo "removed the old install in $(PREFIX)/lib/farm"; fi

proto: deps
	npx buf lint
	npx buf generate

proto-check: deps
	@scripts/check-proto.sh

migrations-check: deps
	@scripts/check-migrations.sh

# Type-aware: reads the built declarations of the packages it imports.
lint: build
	@scripts/lint.sh

# The one code style (dprint.json): rewrites files in place; make lint checks it.
format: deps
	npx dprint fmt

# The checks (proto, migrations, lint) and the unit tier (state classes,
# contract tests with an in-process agent, devsim), side by side.
test: build
	@scripts/test-with-checks.sh --project unit

# The e2e tier: real coordinator, agent, adb and Chromium processes over loopback.
# E2E_WORKERS: files at a time. Three were measured on a quiet machine and were
# no faster than two: the tier is then bound by the CPU (docs/testing.md).
E2E_WORKERS ?= 2
e2e: build
	npx vitest run --project e2e --maxWorkers=$(E2E_WORKERS)

# Both tiers in one vitest run beside the checks, as CI runs them (.ci/run): one queue of
# TEST_WORKERS files at a time, longest first over both tiers, so neither tier's tail leaves a
# core idle (one tier after the other, two files at a time, left about half a core idle: the
# figures are in docs/testing.md, "Where the time goes").
TEST_WORKERS ?= 3
test-all: build
	@scripts/test-with-checks.sh --maxWorkers=$(TEST_WORKERS)

demo: build
	node test/dist/demo/main.js

# Every benchmark in test/bench, then one table: measure, instant figure, realistic ratio, target, result (docs/performance.md).
bench: build
	node test/dist/bench/run-all.js

schema: build
	node test/dist/support/write-manifest-schema.js

clean:
	npx tsc -b --clean

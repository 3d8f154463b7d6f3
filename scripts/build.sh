#!/usr/bin/env bash
# `make build`: the natives, the TypeScript projects, the dashboard and the CLI
# bundle, on both cores. Each step is single-threaded (a C compiler on
# better-sqlite3's sqlite3.c, tsc, vite), so steps that do not need each other
# run side by side:
#
#   natives (npm rebuild, when `make deps` ran npm ci --ignore-scripts) ───────┐
#   tsc shared ─┬─ tsc client agent ─┬─ tsc cli test ─┬─ dashboard type check ──┤
#               ├─ tsc coordinator ──┘                └─ CLI bundle ────────────┤
#               └─ dashboard (vite; needs shared's JavaScript only) ─┘          done
#
# Nothing here needs the natives (tsc, vite and esbuild load no native module
# and no file an install script writes); the tests do, so the build waits for
# them. A step's output is printed when it
# fails, with its name; the first failure fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
# Left by the Makefile's npm ci: the packages' install scripts have not run yet.
PENDING=node_modules/.farm-natives-pending
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

declare -A pids

# Starts `name cmd...` in the background, its output in $logs/name. When it ends it prints
# `build: name: … s wall, … s user, … s sys (… s to … s)`, the seconds since the build began: what
# ran beside what, and where a core was idle.
start() {
  local name=$1
  shift
  (
    t0=$SECONDS rc=0
    TIMEFORMAT="build: $name: %0R s wall, %0U s user, %0S s sys"
    { time "$@" >"$logs/$name" 2>&1; } 2>"$logs/$name.time" || rc=$?
    echo "$(cat "$logs/$name.time") ($t0 s to $SECONDS s)"
    exit "$rc"
  ) &
  pids[$name]=$!
}

# Waits for the named steps; prints the log of any that failed and exits 1.
finish() {
  local name failed=0
  for name in "$@"; do
    if ! wait "${pids[$name]}"; then
      echo "---- build step '$name' failed ----" >&2
      cat "$logs/$name" >&2
      failed=1
    fi
  done
  [ "$failed" -eq 0 ] || exit 1
}

natives() {
  npm rebuild --no-audit --no-fund
  rm -f "$PENDING"
}

steps=()
if [ -f "$PENDING" ]; then
  start natives natives
  steps+=(natives)
fi
start shared npx tsc -b shared
finish shared
start dashboard npx vite build dashboard
start libs npx tsc -b client agent
start coordinator npx tsc -b coordinator
finish libs coordinator
start cli-test npx tsc -b cli test
finish cli-test dashboard
start typecheck npx tsc -p dashboard/tsconfig.json
start bundle node scripts/bundle-cli.mjs
finish typecheck bundle ${steps[@]+"${steps[@]}"}

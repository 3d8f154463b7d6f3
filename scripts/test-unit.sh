#!/usr/bin/env bash
# `make test` after the build: the checks (proto, migrations, lint, import
# cycles, declared imports, format) and the unit tier at once. The unit tier
# keeps about one core busy (its tests wait on sockets and child processes),
# so the checks take the other; their output is held and printed after the
# tests so the two do not interleave. Fails if either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(
  set -e
  scripts/check-proto.sh
  scripts/check-migrations.sh
  scripts/lint.sh
) >"$log" 2>&1 &
checks=$!
npx vitest run --project unit
tests=$?
wait "$checks"
checked=$?
echo "---- checks (proto, migrations, lint) ----"
cat "$log"
[ "$checked" -eq 0 ] || echo "make test: a check failed (above)" >&2
[ "$tests" -eq 0 ] || echo "make test: the unit tier failed (see its report above the checks)" >&2
[ "$checked" -eq 0 ] && [ "$tests" -eq 0 ]

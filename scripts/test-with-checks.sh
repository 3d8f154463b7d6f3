#!/usr/bin/env bash
# The checks (proto, migrations, lint, import cycles, declared imports, format)
# beside one vitest run, after the build: `make test` runs the unit tier with
# them (scripts/test-with-checks.sh --project unit), `make test-all` both tiers
# in one run (one queue of workers: the e2e tier's long files start first and
# the unit tier's short ones fill the gaps, so no core idles while a tier's
# tail finishes). The checks' output is held and printed after the tests so
# the two do not interleave. Fails if either fails.
#
#   scripts/test-with-checks.sh [VITEST-ARGS...]
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
npx vitest run "$@"
tests=$?
wait "$checks"
checked=$?
echo "---- checks (proto, migrations, lint) ----"
cat "$log"
[ "$checked" -eq 0 ] || echo "a check failed (above)" >&2
[ "$tests" -eq 0 ] || echo "the tests failed (see vitest's report above the checks)" >&2
[ "$checked" -eq 0 ] && [ "$tests" -eq 0 ]

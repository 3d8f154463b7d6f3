#!/usr/bin/env bash
# Import cycles that exist at run time (a module reading another's export before
# it is initialised). dpdm -T drops imports TypeScript erases, so a cycle of
# type-only imports is allowed; it replaces eslint's import-x/no-cycle, which
# took a third of the lint time on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! out=$(npx dpdm -T --no-tree --no-warning --progress=false --exit-code circular:1 \
  '{agent,coordinator,cli,client,shared,dashboard}/src/**/*.ts' 'test/**/*.ts' 2>&1); then
  echo "$out" >&2
  echo "check-cycles: import cycles above (break them, or make the import type-only)" >&2
  exit 1
fi
echo "check-cycles: no import cycles"

#!/usr/bin/env bash
# What the compiler does not catch: floating promises (ESLint, type-aware),
# import cycles that exist at run time, imports a workspace does not declare,
# and the one code style (dprint; `make format` applies it).
set -euo pipefail
cd "$(dirname "$0")/.."
npx dprint check
npx eslint agent/src coordinator/src cli/src client/src shared/src dashboard/src test
scripts/check-cycles.sh
node scripts/check-imports.mjs

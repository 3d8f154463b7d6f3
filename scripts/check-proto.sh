#!/usr/bin/env bash
# Fails when buf lint fails, when the schema breaks compatibility with the
# main branch (buf breaking, rules in buf.yaml), or when regenerating the code
# would change a committed file (someone edited a .proto without `make proto`).
set -euo pipefail
cd "$(dirname "$0")/.."
npx buf lint
# Against main: on a feature branch this catches a break before it merges; on
# main itself (CI's clean clone) it compares main with itself, and catches only
# uncommitted breaking edits. A checkout without a main (detached CI checkout)
# uses origin/main; one without either has nothing to compare with.
if git rev-parse --verify -q refs/heads/main >/dev/null 2>&1; then
  npx buf breaking --against '.git#branch=main'
elif main=$(git rev-parse --verify -q refs/remotes/origin/main 2>/dev/null); then
  npx buf breaking --against ".git#ref=$main"
else
  echo "proto: no main branch in this checkout; buf breaking skipped" >&2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx buf generate --output "$tmp"
if ! diff -r "$tmp/shared/src/gen" shared/src/gen >/dev/null; then
  diff -r "$tmp/shared/src/gen" shared/src/gen | head -40 >&2 || true
  echo "generated code is stale: run 'make proto' and commit the result" >&2
  exit 1
fi
echo "proto: lint ok, no breaking change against main, generated code up to date"

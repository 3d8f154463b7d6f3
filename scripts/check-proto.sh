#!/usr/bin/env bash
# Fails when buf lint fails or when regenerating the code would change a
# committed file (someone edited a .proto without running `make proto`).
set -euo pipefail
cd "$(dirname "$0")/.."
npx buf lint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx buf generate --output "$tmp"
if ! diff -r "$tmp/shared/src/gen" shared/src/gen >/dev/null; then
  diff -r "$tmp/shared/src/gen" shared/src/gen | head -40 >&2 || true
  echo "generated code is stale: run 'make proto' and commit the result" >&2
  exit 1
fi
echo "proto: lint ok, generated code up to date"

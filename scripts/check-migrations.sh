#!/usr/bin/env bash
# Fails when a drizzle schema (coordinator, agent) differs from its checked-in
# migrations: someone changed src/db/schema.ts without `npx drizzle-kit
# generate`. Generates into a copy of drizzle/ (offline, ~2 s per package) and
# fails if that would write anything.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for pkg in coordinator agent; do
  cp -r "$pkg/drizzle" "$tmp/$pkg"
  # drizzle-kit prefixes --out with "./", so it must be relative. Flags mirror
  # $pkg/drizzle.config.ts (a config file cannot be combined with --out).
  out=$(realpath --relative-to="$pkg" "$tmp/$pkg")
  # stdin closed: a schema change that needs an answer (rename or drop?) fails instead of prompting.
  if ! log=$(cd "$pkg" && timeout 120 npx drizzle-kit generate --dialect sqlite --schema ./src/db/schema.ts --out "$out" </dev/null 2>&1); then
    printf '%s\n' "$log" >&2
    echo "$pkg: drizzle-kit generate failed" >&2
    status=1
    continue
  fi
  # drizzle-kit exits 0 on some errors: trust only its "nothing to migrate" and an unchanged folder.
  if ! grep -q "No schema changes" <<<"$log" || ! diff -r "$pkg/drizzle" "$tmp/$pkg" >/dev/null; then
    printf '%s\n' "$log" >&2
    diff -r "$pkg/drizzle" "$tmp/$pkg" | head -40 >&2 || true
    echo "$pkg: src/db/schema.ts does not match $pkg/drizzle/: run 'npx drizzle-kit generate' in $pkg/ and commit the migration" >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "migrations: coordinator and agent schemas match their checked-in migrations"
exit "$status"

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
# package:dialect:schema:migrations folder
for entry in coordinator:sqlite:schema.ts:drizzle coordinator:postgresql:pg-schema.ts:drizzle-pg agent:sqlite:schema.ts:drizzle; do
  IFS=: read -r pkg dialect schema dir <<<"$entry"
  cp -r "$pkg/$dir" "$tmp/$pkg-$dir"
  # drizzle-kit prefixes --out with "./", so it must be relative. Flags mirror
  # $pkg/drizzle.config.ts (a config file cannot be combined with --out).
  out=$(realpath --relative-to="$pkg" "$tmp/$pkg-$dir")
  # stdin closed: a schema change that needs an answer (rename or drop?) fails instead of prompting.
  if ! log=$(cd "$pkg" && timeout 120 npx drizzle-kit generate --dialect "$dialect" --schema "./src/db/$schema" --out "$out" </dev/null 2>&1); then
    printf '%s\n' "$log" >&2
    echo "$pkg/$dir: drizzle-kit generate failed" >&2
    status=1
    continue
  fi
  # drizzle-kit exits 0 on some errors: trust only its "nothing to migrate" and an unchanged folder.
  if ! grep -q "No schema changes" <<<"$log" || ! diff -r "$pkg/$dir" "$tmp/$pkg-$dir" >/dev/null; then
    printf '%s\n' "$log" >&2
    diff -r "$pkg/$dir" "$tmp/$pkg-$dir" | head -40 >&2 || true
    echo "$pkg: src/db/$schema does not match $pkg/$dir/: run 'npx drizzle-kit generate' (with --config drizzle-pg.config.ts for drizzle-pg/) in $pkg/ and commit the migration" >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "migrations: the coordinator (SQLite, PostgreSQL) and agent schemas match their checked-in migrations"
exit "$status"

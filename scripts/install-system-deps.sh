#!/usr/bin/env bash
# Installs the Debian packages farm's tests and demo need, only when missing.
set -euo pipefail

need=()
command -v adb >/dev/null 2>&1 || need+=(adb)
{ command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1; } || need+=(ffmpeg)
# The dashboard's browser tests drive Debian's Chromium through playwright-core.
[ -x /usr/bin/chromium ] || need+=(chromium)
# Storage and replica tests start a private PostgreSQL cluster (server binaries only; nothing is enabled or started).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
# deploy/ tests check the systemd units with systemd-analyze.
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

echo "installing Debian packages: ${need[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install: ${need[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

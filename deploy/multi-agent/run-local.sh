#!/usr/bin/env bash
# One coordinator and two agents on this machine, each agent with its own adb
# server and two simulated phones (test/devsim). Stands in for a lab of two
# hosts; see README.md. Needs `make build` first, adb and Node 20.
#
#   deploy/multi-agent/run-local.sh          # serves until Ctrl-C
#
# Environment: FARM_LOCAL_DIR (state; default a new temp dir, kept on exit),
# FARM_LOCAL_PORT (coordinator, default 7430), FARM_LOCAL_ADB_PORTS (default
# "5137 5138": one private adb server per agent, never the usual 5037).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cli="$repo/cli/dist/main.js"
devsim="$repo/test/dist/devsim/main.js"
for f in "$cli" "$devsim"; do
  [ -f "$f" ] || { echo "missing $f: run 'make build' in $repo first" >&2; exit 1; }
done
command -v adb >/dev/null || { echo "adb not found (apt-get install adb)" >&2; exit 1; }

work=${FARM_LOCAL_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/farm-multi.XXXXXX")}
mkdir -p -m 0700 "$work"
port=${FARM_LOCAL_PORT:-7430}
read -r -a adb_ports <<<"${FARM_LOCAL_ADB_PORTS:-5137 5138}"
url="http://127.0.0.1:$port"
# Loopback: tokens may travel in cleartext here without --insecure.
export FARM_COORDINATOR="$url" FARM_LOG_LEVEL="${FARM_LOG_LEVEL:-info}"

farm() { node "$cli" "$@"; }
# A TCP connect only: `adb devices` would start a second server if none answers.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pids=()      # started in this order, stopped in reverse
cleanup() {
  trap - EXIT INT TERM
  echo "stopping..." >&2
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  echo "state and logs kept in $work" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for DESCRIPTION COMMAND...: retries COMMAND for up to 30 s; gives up
# at once when a process started here has exited.
wait_for() {
  local what=$1 deadline=$((SECONDS + 30)) pid
  shift
  until "$@" >/dev/null 2>&1; do
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "a process exited while waiting for $what; logs in $work" >&2; tail -n 5 "$work"/*.log >&2; exit 1; }
    done
    if ((SECONDS > deadline)); then
      echo "timed out waiting for $what; logs in $work" >&2
      exit 1
    fi
    sleep 0.5
  done
}

if listening "$port"; then
  echo "port $port is in use; set FARM_LOCAL_PORT" >&2
  exit 1
fi
echo "coordinator on $url, data dir $work/coordinator" >&2
farm coordinator --listen "127.0.0.1:$port" --data-dir "$work/coordinator" \
  >"$work/coordinator.out" 2>"$work/coordinator.log" &
pids+=($!)
wait_for "the coordinator" test -s "$work/coordinator/admin.token"
admin="$work/coordinator/admin.token"

for i in 1 2; do
  name="lab-$i"
  adb_port=${adb_ports[i - 1]}
  if listening "$adb_port"; then
    echo "port $adb_port is in use; set FARM_LOCAL_ADB_PORTS" >&2
    exit 1
  fi
  # One adb server per agent: on real hosts each agent owns its host's server.
  adb -P "$adb_port" nodaemon server >"$work/adb-$i.log" 2>&1 &
  pids+=($!)
  wait_for "adb server on port $adb_port" listening "$adb_port"
  node "$devsim" --devices 2 --adb-port "$adb_port" --format json >"$work/devsim-$i.json" 2>"$work/devsim-$i.log" &
  pids+=($!)

  # The secret is printed once; keep it 0600 like a real agent.token.
  farm token create --kind agent --name "$name" --token-file "$admin" --output json \
    | node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).token+"\n"))' \
    >"$work/$name.token"
  chmod 0600 "$work/$name.token"

  # Distinct data dirs and names; one lock dir, as for agents on one host.
  farm agent --coordinator "$url" --name "$name" \
    --data-dir "$work/agent-$i" --token-file "$work/$name.token" \
    --adb-port "$adb_port" --no-adb-start --lock-dir "$work/locks" \
    >"$work/agent-$i.out" 2>"$work/agent-$i.log" &
  pids+=($!)
done

all_up() {
  farm agents --token-file "$admin" --output json | node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const a = JSON.parse(s).agents;
      process.exit(a.length === 2 && a.every((x) => x.online && x.deviceCount === 2) ? 0 : 1);
    });'
}
wait_for "two agents online with two phones each" all_up

farm agents --token-file "$admin" --output pretty
echo
farm devices --token-file "$admin" --output pretty
cat <<EOF

In another shell:
  export FARM_COORDINATOR=$url
  node $cli agents  --token-file $admin --output pretty
  node $cli devices --token-file $admin --output pretty
  node $cli lease acquire --agent lab-2 --token-file $admin

Logs: $work/*.log. Ctrl-C stops everything.
EOF
while :; do sleep 3600; done

#!/usr/bin/env bash
# Kill the to-do example with SIGKILL at random moments, restart it, and check after
# every restart that (1) its audit passes (the index and the items agree, every title
# is readable and the one its id gives, the counters add up, and the allocated blocks
# are exactly the reachable ones: no title leaked) and (2) no acknowledged addition
# was lost: the count of additions recovered is at least the last one acknowledged.
# Usage: crates/pisces/examples/todo_crash_loop.sh [rounds]
# TODO_BIN=path runs that build of the example (CI passes the one its test build made);
# without it the script builds the example.
set -euo pipefail
rounds=${1:-10}
pool=/dev/shm/pisces-todo-crash-$$.pool
log=$(mktemp)
trap 'rm -f "$pool" "$log"' EXIT
if [ -n "${TODO_BIN:-}" ]; then
  bin=$TODO_BIN
else
  cargo build --release -q -p pisces --example todo
  bin=target/release/examples/todo
fi
last_ack=0
for i in $(seq 1 "$rounds"); do
  "$bin" "$pool" 30 >"$log" 2>/dev/null &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  acked=$(grep '^ack ' "$log" | awk '{print $2}' | sort -n | tail -1)
  acked=${acked:-$last_ack}
  # Restart for 0 s: runs recovery and the audit, prints "recovered N audit ok".
  out=$("$bin" "$pool" 0 2>&1) || { echo "round $i: INVARIANT BROKEN: $out"; exit 1; }
  recovered=$(echo "$out" | awk '/^recovered/ {print $2}')
  if ! echo "$out" | grep -q "^recovered [0-9]* audit ok"; then
    echo "round $i: INVARIANT BROKEN: $out"; exit 1
  fi
  if [ "$recovered" -lt "$acked" ]; then
    echo "round $i: LOST WORK: acknowledged $acked, recovered $recovered"; exit 1
  fi
  echo "round $i: killed after $acked acknowledged additions; recovered $recovered; audit ok"
  last_ack=$recovered
done
echo "all $rounds rounds consistent"

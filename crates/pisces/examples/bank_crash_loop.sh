#!/usr/bin/env bash
# Kill the bank example with SIGKILL at random moments, restart it, and check after
# every restart that (1) the total is conserved and (2) no acknowledged transfer was
# lost: the transfer counter recovered is at least the last number acknowledged.
# Usage: crates/pisces/examples/bank_crash_loop.sh [rounds]
# BANK=path runs that build of the example (CI passes the one its test build made);
# without it the script builds the example.
set -euo pipefail
rounds=${1:-10}
pool=/dev/shm/pisces-bank-crash-$$.pool
log=$(mktemp)
trap 'rm -f "$pool" "$log"' EXIT
if [ -n "${BANK:-}" ]; then
  bin=$BANK
else
  cargo build --release -q -p pisces --example bank
  bin=target/release/examples/bank
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
  # Restart for 0 s: runs recovery and the audit, prints "recovered N".
  out=$("$bin" "$pool" 0 2>&1)
  recovered=$(echo "$out" | awk '/^recovered/ {print $2}')
  if ! echo "$out" | grep -q "total 1000000 (expected 1000000)"; then
    echo "round $i: INVARIANT BROKEN: $out"; exit 1
  fi
  if [ "$recovered" -lt "$acked" ]; then
    echo "round $i: LOST WORK: acknowledged $acked, recovered $recovered"; exit 1
  fi
  echo "round $i: killed after $acked acknowledged transfers; recovered $recovered; total conserved"
  last_ack=$recovered
done
echo "all $rounds rounds consistent"

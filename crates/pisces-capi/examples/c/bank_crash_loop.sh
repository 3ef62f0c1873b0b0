#!/usr/bin/env bash
# Crash loop of the bank example: start `bank POOL run` (transfers + auditor), kill -9
# it at a random moment, reopen the pool (recovery) and audit; N times. Exits non-zero
# if any audit (in the running program or after a crash) finds the total changed.
#
#   bank_crash_loop.sh BANK_BINARY POOL_PATH [KILLS [ENGINE]]
set -euo pipefail
bank="$1"
pool="$2"
kills="${3:-10}"
engine="${4:-}"

rm -f "$pool"
"$bank" "$pool" init 64 1000 ${engine:+"$engine"}
for i in $(seq 1 "$kills"); do
    "$bank" "$pool" run 0 3 >/dev/null &
    pid=$!
    # 0.3 .. 0.9 s: usually past recovery and many transfers in (a kill during the
    # open's recovery is a fine crash point too).
    sleep "0.$((RANDOM % 7 + 3))"
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" && status=0 || status=$?
        echo "round $i: bank exited on its own (status $status) before the kill" >&2
        exit 1
    fi
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    echo -n "round $i: killed; "
    if ! "$bank" "$pool" audit; then
        echo "round $i: audit after recovery FAILED" >&2
        exit 1
    fi
done
echo "crash loop: $kills kill -9s, the invariant held after every recovery"

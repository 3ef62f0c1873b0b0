#!/usr/bin/env bash
# Run the kv example through put, get, del and list on a fresh pool and check what it
# prints: values of several lengths, a replaced value, a deleted key, byte-order
# listing with a prefix, the exit status of a missing key, and the data surviving
# between runs (every command is a separate process opening the pool).
# KV=path runs that build of the example (CI passes the one its test build made);
# without it the script builds the example.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ -n "${KV:-}" ]; then
  bin=$KV
else
  cargo build --release -q -p pisces --example kv
  bin=target/release/examples/kv
fi
kv() { "$bin" --pool "$dir/kv.pool" "$@"; }
fail() { echo "kv_check: $*" >&2; exit 1; }
long=$(printf 'x%.0s' $(seq 1 5000))
kv put fruit/pear green
kv put fruit/apple red
kv put fruit/fig "$long"
kv put veg/leek white
kv put fruit/apple "very red"
kv put "" "the empty key"
[ "$(kv get fruit/apple)" = "very red" ] || fail "replaced value"
[ "$(kv get fruit/fig)" = "$long" ] || fail "5000-byte value"
[ "$(kv get '')" = "the empty key" ] || fail "empty key"
kv del fruit/pear
if kv get fruit/pear; then fail "deleted key still there"; fi
if kv del fruit/pear; then fail "second del succeeded"; fi
[ "$(kv list fruit/ | cut -f1 | tr '\n' ' ')" = "fruit/apple fruit/fig " ] || fail "list fruit/: $(kv list fruit/)"
[ "$(kv list | cut -f1 | tr '\n' ' ')" = " fruit/apple fruit/fig veg/leek " ] || fail "list: $(kv list)"
if kv frobnicate 2>/dev/null; then fail "a bad command succeeded"; fi
echo "kv example: put, get, del and list consistent"

#!/usr/bin/env bash
# CI of the C interface: build libpisces (release), compile the C test suite and the
# bank example with -Wall -Werror against include/pisces.h, run the tests and a short
# crash loop (3 kill -9s of the bank program, each followed by recovery and an audit).
#
# Environment:
#   PISCES_LIB_DIR  use the libpisces.so in this directory instead of building one
#                   (the Rust test tests/c_suite.rs passes its own build)
#   CC              the C compiler (default cc)
#   KILLS           crash-loop rounds (default 3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cc="${CC:-cc}"

if [[ -n "${PISCES_LIB_DIR:-}" ]]; then
    libdir="$PISCES_LIB_DIR"
else
    (cd "$root" && nice -n 19 cargo build -p libpisces --release)
    libdir="${CARGO_TARGET_DIR:-$root/target}/release"
fi
[[ -f "$libdir/libpisces.so" ]] || { echo "ci.sh: no libpisces.so in $libdir" >&2; exit 1; }

# The programs must load this library, also under `cargo test`, whose LD_LIBRARY_PATH
# names target/<profile>/ (which may hold an older libpisces.so) before the rpath.
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

work="$(mktemp -d /tmp/pisces-capi-ci.XXXXXX)"
# The pools go to tmpfs, where they get the DRAM medium: these checks are of the API
# and of recovery after kill -9 (which tmpfs survives), not of power loss, and on a
# disk every commit would wait for an msync.
pools="$(mktemp -d /dev/shm/pisces-capi-ci.XXXXXX 2>/dev/null || mktemp -d "$work/pools.XXXXXX")"
trap 'rm -rf "$work" "$pools"' EXIT
flags=(-std=c11 -Wall -Wextra -Werror -O2 -g -I"$here/include")
link=(-L"$libdir" -Wl,-rpath,"$libdir" -lpisces -lpthread)

echo "== compile (cc -Wall -Werror)"
"$cc" "${flags[@]}" -o "$work/test_pisces" "$here/tests/c/test_pisces.c" "${link[@]}"
"$cc" "${flags[@]}" -o "$work/bank" "$here/examples/c/bank.c" "${link[@]}"
# The static library links too (with libpmemobj when this build has the pmdk engine).
if [[ -f "$libdir/libpisces.a" ]]; then
    static=("$libdir/libpisces.a" -lpthread -ldl -lm)
    "$cc" "${flags[@]}" -o "$work/test_pisces_static" "$here/tests/c/test_pisces.c" "${static[@]}" 2>/dev/null ||
        "$cc" "${flags[@]}" -o "$work/test_pisces_static" "$here/tests/c/test_pisces.c" "${static[@]}" -lpmemobj
fi
# The header also compiles as C++ when a C++ compiler is present.
if command -v c++ >/dev/null 2>&1; then
    printf '#include "pisces.h"\nint main() { return pisces_engine_count() > 0 ? 0 : 1; }\n' >"$work/hdr.cpp"
    c++ -Wall -Werror -I"$here/include" -o "$work/hdr" "$work/hdr.cpp" "${link[@]}"
    "$work/hdr"
fi

echo "== C test suite"
mkdir -p "$pools/tests"
"$work/test_pisces" "$pools/tests"

if [[ -x "$work/test_pisces_static" ]]; then
    echo "== C test suite, statically linked"
    mkdir -p "$pools/tests-static"
    "$work/test_pisces_static" "$pools/tests-static" | tail -1
fi

echo "== bank example: crash loop"
KILLS="${KILLS:-3}" "$here/examples/c/bank_crash_loop.sh" "$work/bank" "$pools/bank.pool" "${KILLS:-3}"
echo "ci.sh: all C checks passed"

#!/usr/bin/env bash
# Everything `make test` checks, in order, ending with one summary line
# "N passed, N failed" (each cargo test, each busted test, each lint counts).
#
# Assumes the release library is built (the Makefile does that first).
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
failures=()
skipped=()
# What each failing suite said about its failures, repeated at the end so
# that the tail of a long log (all a CI summary may keep) names them.
failure_details=$(mktemp)
trap 'rm -f "$failure_details"' EXIT

# Kernels this CPU can run; each Rust and Lua suite runs once per kernel
# (the Rust tests also compare every kernel the CPU runs against the
# byte-at-a-time oracle, whichever is pinned).
has_flags() {
    local flag
    for flag in "$@"; do
        grep -qw "$flag" /proc/cpuinfo || return 1
    done
}
kernels=(scalar)
if has_flags avx2 pclmulqdq popcnt bmi1; then
    kernels+=(avx2)
fi
if has_flags avx2 avx512f avx512bw avx512vbmi avx512_vbmi2 pclmulqdq popcnt bmi1; then
    kernels+=(avx512)
else
    echo "note: this CPU has no AVX-512 with VBMI and VBMI2: the avx512 kernel is not tested here"
fi

# Each section header carries the seconds since this script started, so the
# slow parts of the 15-minute budget are visible in any CI log.
section() { printf '\n=== [%ds] %s\n' "$SECONDS" "$*"; }

# A single pass/fail check (lints, formatting).
check() {
    local name=$1
    shift
    section "$name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$name")
    fi
}

# Runs a command whose output reports many results, counted by `counter`
# (a function printing "PASSED FAILED" for the output file). A non-zero
# exit with no failure reported (it did not build, a spec file did not
# load, the runner died) counts as one failure.
counted_tests() {
    local name=$1 counter=$2
    shift 2
    section "$name"
    local out rc p f
    out=$(mktemp)
    "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    read -r p f < <("$counter" "$out")
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        failed=$((failed + 1))
    fi
    if [ "$rc" -ne 0 ]; then
        failures+=("$name")
        {
            echo "--- $name"
            grep -E -A12 '^not ok |^---- |panicked at' "$out" | head -60
        } >>"$failure_details"
    fi
    rm -f "$out"
}

# cargo test's "test result: ok. N passed; M failed" lines, added up.
count_cargo() {
    awk '/^test result:/ {
        for (i = 1; i < NF; i++) {
            if ($(i + 1) ~ /^passed/) p += $i
            if ($(i + 1) ~ /^failed/) f += $i
        }
    } END { print p + 0, f + 0 }' "$1"
}

# TAP: "ok" and "not ok" lines.
count_tap() {
    echo "$(grep -c '^ok ' "$1")" "$(grep -c '^not ok ' "$1")"
}

cargo_tests() {
    local name=$1
    shift
    counted_tests "$name" count_cargo "$@"
}

tap_tests() {
    local name=$1
    shift
    counted_tests "$name" count_tap "$@"
}

# busted in TAP form.
busted_tests() {
    local name=$1
    shift
    tap_tests "$name" "$@" -o TAP
}

for k in "${kernels[@]}"; do
    cargo_tests "cargo test (QJSON_KERNEL=$k)" env QJSON_KERNEL="$k" cargo test --release --quiet
done
check "cargo clippy -D warnings" cargo clippy --release --all-targets --quiet -- -D warnings
check "cargo fmt --check" cargo fmt --check
check "cargo doc -D warnings (every intra-doc link resolves)" env RUSTDOCFLAGS="-D warnings" \
    cargo doc --no-deps --document-private-items --quiet
check "luacheck" luacheck --quiet lua spec benches tools examples
check "benchmark harness runs (QUICK=1)" env QUICK=1 luajit benches/lua_bench.lua
check "A/B harness runs (tools/ab_parse.sh, a build against itself)" bash -c \
    'printf "{\"a\":[1,2.5,\"x\"]}" >target/ab_check.json && ROUNDS=1 tools/ab_parse.sh \
        target/release/libqjson.so target/release/libqjson.so target/ab_check.json'
# OpenResty's lua-cjson fork, which the specs compare encode and the
# module API with (spec/helper.lua), built from ../shared/baselines; where
# that is missing, those comparisons are pending.
section "OpenResty's lua-cjson fork for the specs (tools/baselines.sh cjson)"
if fork=$(tools/baselines.sh cjson) && [ -n "$fork" ]; then
    export QJSON_CJSON_FORK=$fork
    echo "$fork"
else
    echo "SKIPPED: the specs' comparisons with OpenResty's cjson are pending"
    skipped+=("comparisons with OpenResty's lua-cjson fork: its sources are missing")
fi
for k in "${kernels[@]}"; do
    busted_tests "busted under LuaJIT (QJSON_KERNEL=$k)" env QJSON_KERNEL="$k" busted --lua=luajit
done

# OpenResty's LuaJIT has Lua 5.2 compatibility (#, pairs and ipairs see
# proxies' metamethods); Debian's has not. Every spec again under one built
# that way (tools/luajit52.sh, cached in target/luajit52), finding Debian's
# Lua modules (busted, cjson) on Debian's paths. spec/limits_spec.lua's
# large loops, which check the native parser, ran above and take a sample.
section "LuaJIT with Lua 5.2 compatibility (tools/luajit52.sh)"
if luajit52=$(tools/luajit52.sh); then
    busted_tests "busted under LuaJIT with Lua 5.2 compatibility" \
        env QJSON_SAMPLE_LIMITS=1 LUA_PATH="$(luajit -e 'io.write(package.path)')" \
        LUA_CPATH="$(luajit -e 'io.write(package.cpath)')" \
        "$luajit52" "$(command -v busted)" --lua="$luajit52"
else
    failed=$((failed + 1))
    failures+=("building LuaJIT with Lua 5.2 compatibility")
fi

# aarch64 (the NEON kernel): cross-built with Debian's Rust and run under
# qemu-aarch64 (tools/aarch64.sh; `make test` installs it with
# tools/deps.sh cross). Where that cannot run, skipped, saying why.
section "aarch64 under emulation (tools/aarch64.sh)"
aarch64_start=$SECONDS
if why=$(tools/aarch64.sh check); then
    cargo_tests "cargo test for aarch64 under qemu-aarch64 (neon kernel)" tools/aarch64.sh test
    check "cargo clippy -D warnings for aarch64" tools/aarch64.sh clippy
    tap_tests "LuaJIT arm64 under qemu-aarch64: the outputs of x86-64 (tools/outputs.lua)" \
        tools/aarch64.sh smoke
    tap_tests "the aarch64 binary rock in LuaJIT arm64 under qemu-aarch64" tools/aarch64.sh rock
    echo "aarch64 part: $((SECONDS - aarch64_start)) s"
else
    echo "SKIPPED: $why"
    skipped+=("aarch64 under emulation: $why")
fi

for k in "${kernels[@]}"; do
    tap_tests "specs inside nginx (QJSON_KERNEL=$k)" env QJSON_KERNEL="$k" tools/nginx-lua spec/nginx/run.lua
    tap_tests "gateway example in nginx (QJSON_KERNEL=$k)" env QJSON_KERNEL="$k" tools/gateway-test
done
tap_tests "install: luarocks (both rockspecs), make install, loaded from the tree" \
    tools/test_install.sh
tap_tests "specs inside nginx, \$request_body named in a log_format (nginx caches it)" \
    env QJSON_SPEC_BODY_CACHED=1 tools/nginx-lua --http 'log_format qjson_body $request_body;' \
    spec/nginx/run.lua
check "qjson.sse in a real nginx body filter" tools/nginx-lua spec/nginx/sse_body_filter.lua
check "bounded memory: 2000 x 1 MB parses, RSS within 64 MB (tools/soak.lua)" \
    luajit tools/soak.lua memory 2000 64
check "bounded memory with 90 MB of Lua objects alive: 20000 x 100 KB parses (tools/soak.lua)" \
    luajit tools/soak.lua heap 90 20000 32
check "memory given back: RSS after a burst of 8 x 25 MB bodies (tools/soak.lua)" \
    luajit tools/soak.lua burst 25 16
tap_tests "valgrind memcheck, JIT off: parse, safe, decode, eager, encode, re-entry, pointer specs" \
    tools/memcheck.sh spec/parse_spec.lua spec/safe_spec.lua spec/decode_spec.lua \
    spec/eager_spec.lua spec/encode_spec.lua spec/reentry_spec.lua spec/pointer_spec.lua

section "done"
for reason in "${skipped[@]}"; do
    echo "skipped: $reason"
done
if [ ${#failures[@]} -gt 0 ]; then
    cat "$failure_details"
    echo "failed: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

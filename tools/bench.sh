#!/usr/bin/env bash
# `make bench`: the native core benchmark on every payload, with simdjson's
# figures per kernel beside qjson's (timed in the same process), then the
# Lua comparison against OpenResty's lua-cjson fork and lua-resty-simdjson
# (all built by tools/baselines.sh when ../shared/baselines or
# BASELINES=DIR is there; Debian's lua-cjson and no simdjson figures
# otherwise).
#
#   REPORT=1   also rewrite the generated part of docs/benchmarks.md and the
#              chart docs/benchmarks.png (`make bench-report`)
#   QUICK=1    every scenario briefly: checks the harness, not the speed
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# OpenResty's lua-cjson fork, Kong's lua-resty-simdjson and simdjson's
# amalgamation (tools/baselines.sh says why when there are none: Debian's
# lua-cjson is used then, and the native table has no simdjson columns).
QJSON_BASELINES=$(tools/baselines.sh) || QJSON_BASELINES=""
export QJSON_BASELINES

echo "== native core: stage 1, stage 2 and full validation vs a memchr pass and simdjson (GB/s)"
if [ "${QUICK:-0}" = 1 ]; then
    echo "(skipped under QUICK=1)"
    : >"$work/native.txt"
else
    mkdir "$work/payloads"
    files=$(luajit benches/payloads.lua "$work/payloads")
    # simdjson in the benchmark's own process (benches/simdjson_shim.cpp),
    # built from the amalgamation the baselines come with.
    simdjson=""
    amalgamation=${QJSON_BASELINES:+$QJSON_BASELINES/simdjson-3.9.4}
    if [ -n "$amalgamation" ] && [ -f "$amalgamation/simdjson.cpp" ]; then
        simdjson=$PWD/target/simdjson/libsimdjson_shim.so
        if [ ! -f "$simdjson" ] || [ benches/simdjson_shim.cpp -nt "$simdjson" ] \
            || [ "$amalgamation/simdjson.cpp" -nt "$simdjson" ]; then
            echo "(building simdjson 3.9.4 for the comparison, about 15 s)"
            mkdir -p target/simdjson
            c++ -O3 -DNDEBUG -std=c++17 -shared -fPIC -I"$amalgamation" -o "$simdjson" \
                benches/simdjson_shim.cpp "$amalgamation/simdjson.cpp"
        fi
    else
        echo "(no simdjson among the baselines: simdjson's figures are skipped)"
    fi
    # shellcheck disable=SC2086 # one argument per file
    QJSON_SIMDJSON=$simdjson cargo bench --quiet --bench core -- $files | tee "$work/native.txt"
fi

echo
echo "== stage 1 instructions a 64-byte block under callgrind, qjson's kernels beside simdjson's"
if [ "${QUICK:-0}" = 1 ]; then
    echo "(skipped under QUICK=1)"
else
    tools/stage1_insns.sh
fi

echo
echo "== aarch64 NEON kernel under qemu: stage-1 instructions per byte, beside the scalar kernel's"
if [ "${QUICK:-0}" = 1 ]; then
    echo "(skipped under QUICK=1)"
elif why=$(tools/aarch64.sh check); then
    tools/aarch64.sh count
else
    echo "(skipped: $why)"
fi

echo
which="Debian's lua-cjson"
if [ -n "$QJSON_BASELINES" ]; then
    which="OpenResty's lua-cjson fork and lua-resty-simdjson"
fi
echo "== Lua: qjson vs $which, one LuaJIT process per scenario"
if [ "${REPORT:-0}" = 1 ]; then
    luajit benches/lua_bench.lua --report docs/benchmarks.md docs/benchmarks.png "$work/native.txt"
else
    luajit benches/lua_bench.lua
fi

echo
echo "== Lua: a small document while the Lua heap holds many objects (benches/heap_pacing.lua)"
if [ "${QUICK:-0}" = 1 ]; then
    echo "(skipped under QUICK=1)"
else
    luajit benches/heap_pacing.lua 0 30000 300000 1000000
fi

echo
echo "== Lua: shapes where qjson trailed cjson (benches/trailing.lua)"
if [ "${QUICK:-0}" = 1 ]; then
    echo "(skipped under QUICK=1)"
else
    LUA_CPATH="${QJSON_BASELINES:+$QJSON_BASELINES/?.so;};;" luajit benches/trailing.lua
fi

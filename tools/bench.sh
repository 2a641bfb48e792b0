#!/usr/bin/env bash
# `make bench`: the native core benchmark on every payload, with simdjson's
# own figures per kernel beside qjson's, then the Lua comparison against
# OpenResty's lua-cjson fork and lua-resty-simdjson (all built by
# tools/baselines.sh when ../shared/baselines or BASELINES=DIR is there;
# Debian's lua-cjson and no simdjson figures otherwise).
#
#   REPORT=1   also rewrite the generated part of docs/benchmarks.md and the
#              chart docs/benchmarks.png (`make bench-report`)
#   QUICK=1    every scenario briefly: checks the harness, not the speed
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# OpenResty's lua-cjson fork, Kong's lua-resty-simdjson and simdjson's
# sjbench (tools/baselines.sh says why when there are none: Debian's
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
    sjbench=""
    if [ -n "$QJSON_BASELINES" ] && [ -x "$QJSON_BASELINES/sjbench" ]; then
        sjbench=$QJSON_BASELINES/sjbench
    else
        echo "(no sjbench among the baselines: simdjson's figures are skipped)"
    fi
    # shellcheck disable=SC2086 # one argument per file
    QJSON_SJBENCH=$sjbench cargo bench --quiet --bench core -- $files | tee "$work/native.txt"
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

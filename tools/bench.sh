#!/usr/bin/env bash
# `make bench`: the native core benchmark, then the Lua comparison against
# lua-cjson (and lua-resty-simdjson when installed). QUICK=1 runs every
# scenario briefly, to check the harness rather than measure.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== native core: stage 1 and full validation vs a memchr pass (GB/s)"
if [ "${QUICK:-0}" = 1 ]; then
    echo "(skipped under QUICK=1)"
else
    cargo bench --quiet --bench core
fi

echo
echo "== Lua: qjson vs lua-cjson, one LuaJIT process per scenario"
luajit benches/lua_bench.lua

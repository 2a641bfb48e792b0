#!/usr/bin/env bash
# Prints the directory of the baselines qjson is measured against (OpenResty's
# lua-cjson fork, Kong's lua-resty-simdjson, simdjson's sjbench), building
# them once into target/baselines; prints nothing when there are none.
#
#   BASELINES=DIR           use a build made with ../shared/baselines/build.sh
#   ../shared/baselines/    otherwise built from there (about 20 s, once)
#
#   tools/baselines.sh cjson    prints the path of the fork's cjson.so alone,
#                               built from its sources there into
#                               target/cjson-fork (seconds, no download), for
#                               the specs that compare with it (make test)
#
# Messages go to stderr; the directory alone to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${BASELINES:-}" ]; then
    if [ ! -f "$BASELINES/cjson.so" ]; then
        echo "baselines: BASELINES=$BASELINES has no cjson.so (build it with build.sh DIR)" >&2
        exit 1
    fi
    dir=$(cd "$BASELINES" && pwd)
    if [ "${1:-}" = cjson ]; then
        echo "$dir/cjson.so"
    else
        echo "$dir"
    fi
    exit 0
fi

sources=""
for dir in ../shared/baselines /work/shared/baselines; do
    if [ -x "$dir/build.sh" ]; then
        sources=$(cd "$dir" && pwd)
        break
    fi
done
if [ -z "$sources" ]; then
    echo "baselines: ../shared/baselines not found and BASELINES not set:" \
         "comparing with Debian's lua-cjson 2.1.0 (upstream, not OpenResty's fork)" >&2
    exit 0
fi

if [ "${1:-}" = cjson ]; then
    out=$PWD/target/cjson-fork
    if [ ! -f "$out/cjson.so" ]; then
        luainc=""
        for d in /usr/include/luajit-2.1 /usr/local/openresty/luajit/include/luajit-2.1; do
            [ -z "$luainc" ] && [ -f "$d/lua.h" ] && luainc=$d
        done
        [ -n "$luainc" ] || { echo "baselines: no LuaJIT headers" >&2; exit 1; }
        rm -rf "$out.tmp"
        cp -r "$sources/lua-cjson-openresty" "$out.tmp"
        make -s -C "$out.tmp" LUA_INCLUDE_DIR="$luainc" cjson.so >&2 || exit 1
        mkdir -p "$out"
        mv "$out.tmp/cjson.so" "$out/cjson.so"
        rm -rf "$out.tmp"
    fi
    echo "$out/cjson.so"
    exit 0
fi

out=$PWD/target/baselines
# Rebuilt when build.sh changes; a failed build leaves no stamp.
if [ ! -f "$out/.built" ] || [ "$sources/build.sh" -nt "$out/.built" ]; then
    echo "baselines: building OpenResty's lua-cjson, lua-resty-simdjson and sjbench into $out" >&2
    rm -rf "$out"
    mkdir -p "$out"
    "$sources/build.sh" "$out" >"$out/build.log" 2>&1 || {
        tail -20 "$out/build.log" >&2
        echo "baselines: build failed (log: $out/build.log)" >&2
        exit 1
    }
    touch "$out/.built"
fi
echo "$out"

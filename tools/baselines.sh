#!/usr/bin/env bash
# Prints the directory of the baselines qjson is measured against (OpenResty's
# lua-cjson fork, Kong's lua-resty-simdjson, simdjson's sjbench), building
# them once into target/baselines; prints nothing when there are none.
#
#   BASELINES=DIR           use a build made with ../shared/baselines/build.sh
#   ../shared/baselines/    otherwise built from there (about 20 s, once)
#
# Messages go to stderr; the directory alone to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${BASELINES:-}" ]; then
    if [ ! -f "$BASELINES/cjson.so" ]; then
        echo "baselines: BASELINES=$BASELINES has no cjson.so (build it with build.sh DIR)" >&2
        exit 1
    fi
    (cd "$BASELINES" && pwd)
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

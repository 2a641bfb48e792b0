#!/usr/bin/env bash
# Instructions per workload of benches/insn_loops.lua, qjson beside cjson
# (OpenResty's fork when tools/baselines.sh finds one, else the installed
# cjson), counted by callgrind, and the Lua heap bytes each allocates:
#
#   tools/lua_insns.sh [WORKLOAD...]    default: every workload
#   MISSES=1 tools/lua_insns.sh ...     also data misses of a simulated
#                                       512 KB L2 (callgrind --cache-sim)
#   HANDLERS=1 tools/lua_insns.sh ...   each workload in a coroutine of its
#                                       own, as nginx runs a handler
#                                       (benches/insn_loops.lua)
#
# A count is the difference between a run of 3N workloads and one of N,
# over 2N (N = 20000), so start-up and compilation cancel. Counts move a
# little from run to run (where the collector's cycles fall shapes what
# LuaJIT compiles); callgrind does not see AVX-512, so qjson runs its
# AVX2 kernel here.
#
# Misses show what instructions hide: the documents, proxies and tables a
# workload leaves to the collector come back to the allocator a cycle
# later, cold, and every line a parse touches in them costs a trip to
# memory (see "Cold documents" in src/document.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "lua_insns: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --quiet
baselines=$(tools/baselines.sh 2>/dev/null || true)
cpath=";;"
[ -n "$baselines" ] && cpath="$baselines/?.so;;"

workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
    workloads=(empty-read empty-get tool-read tool-get tool-eager tool-materialize tool-modify tool-nested tool-add sse-read sse-get sse-eager sse-materialize sse-modify sse-nested sse-add chat-eager cjk-eager esc-eager esc-read esc-get)
fi

N=20000
# Another build of the library to count (an A/B against this tree's Lua).
qjson_lib=${QJSON_LIB:-target/release/libqjson.so}
misses=${MISSES:-0}
cache_sim=()
[ "$misses" = 1 ] && cache_sim=(--cache-sim=yes --D1=32768,8,64 --LL=524288,8,64)
# "INSTRUCTIONS MISSES" of a run (MISSES 0 without the cache simulation).
count() {
    local out
    out=$(LUA_CPATH=$cpath QJSON_LIB=$qjson_lib \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null --error-exitcode=0 \
        "${cache_sim[@]}" luajit benches/insn_loops.lua "$1" "$2" 2>&1) || { echo "$out" >&2; exit 1; }
    echo "$out" | awk '/I *refs:/ { gsub(",", "", $4); i = $4 }
                       /LLd misses:/ { gsub(",", "", $4); m = $4 }
                       END { print i, m + 0 }'
}

header=$(printf '%-12s %10s %10s %7s %8s %8s' workload qjson cjson ratio "qjson B" "cjson B")
[ "$misses" = 1 ] && header+=$(printf ' %9s %9s' "qjson L2" "cjson L2")
echo "$header"
for w in "${workloads[@]}"; do
    line=$(printf '%-12s' "$w")
    declare -A per=() miss=()
    for lib in qjson cjson; do
        read -r a ma < <(count "$lib:$w" $N)
        read -r b mb < <(count "$lib:$w" $((3 * N)))
        per[$lib]=$(( (b - a) / (2 * N) ))
        miss[$lib]=$(awk -v a="$ma" -v b="$mb" -v n=$N 'BEGIN { printf "%.1f", (b - a) / (2 * n) }')
        line+=$(printf ' %10d' "${per[$lib]}")
    done
    line+=$(awk -v q="${per[qjson]}" -v c="${per[cjson]}" 'BEGIN { printf " %6.2fx", c / q }')
    for lib in qjson cjson; do
        line+=$(printf ' %8s' "$(LUA_CPATH=$cpath QJSON_LIB=$qjson_lib \
            luajit benches/insn_loops.lua --bytes "$lib:$w")")
    done
    [ "$misses" = 1 ] && line+=$(printf ' %9s %9s' "${miss[qjson]}" "${miss[cjson]}")
    echo "$line"
    unset per miss
done
echo "(instructions per workload; ratio = cjson / qjson; B: Lua heap bytes it allocates; cjson from ${baselines:-the installed lua-cjson})"
[ "$misses" = 1 ] && echo "(L2: data misses per workload of a simulated 512 KB, 8-way L2 behind a 32 KB L1)"
exit 0

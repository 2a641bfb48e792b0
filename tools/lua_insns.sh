#!/usr/bin/env bash
# Instructions per workload of benches/insn_loops.lua, qjson beside cjson
# (OpenResty's fork when tools/baselines.sh finds one, else the installed
# cjson), counted by callgrind:
#
#   tools/lua_insns.sh [WORKLOAD...]    default: every workload
#
# A count is the difference between a run of 3N workloads and one of N,
# over 2N (N = 20000), so start-up and compilation cancel. Counts move a
# little from run to run (where the collector's cycles fall shapes what
# LuaJIT compiles); callgrind does not see AVX-512, so qjson runs its
# AVX2 kernel here.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "lua_insns: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --quiet
baselines=$(tools/baselines.sh 2>/dev/null || true)
cpath=";;"
[ -n "$baselines" ] && cpath="$baselines/?.so;;"

workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
    workloads=(tool-read tool-eager tool-modify tool-nested tool-add sse-read sse-modify sse-nested sse-add)
fi

N=20000
count() {
    local out
    out=$(LUA_CPATH=$cpath QJSON_LIB=target/release/libqjson.so \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null --error-exitcode=0 \
        luajit benches/insn_loops.lua "$1" "$2" 2>&1) || { echo "$out" >&2; exit 1; }
    echo "$out" | sed -n 's/.*refs: *//p' | tr -d ,
}

printf '%-12s %10s %10s %7s\n' workload qjson cjson ratio
for w in "${workloads[@]}"; do
    line=$(printf '%-12s' "$w")
    declare -A per=()
    for lib in qjson cjson; do
        a=$(count "$lib:$w" $N)
        b=$(count "$lib:$w" $((3 * N)))
        per[$lib]=$(( (b - a) / (2 * N) ))
        line+=$(printf ' %10d' "${per[$lib]}")
    done
    line+=$(awk -v q="${per[qjson]}" -v c="${per[cjson]}" 'BEGIN { printf " %6.2fx", c / q }')
    echo "$line"
    unset per
done
echo "(instructions per workload; ratio = cjson / qjson; cjson from ${baselines:-the installed lua-cjson})"

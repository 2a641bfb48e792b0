#!/usr/bin/env bash
# Instructions per 64-byte block of stage 1, counted by callgrind, per
# corpus file: qjson's kernels (benches/insns.rs) beside simdjson's
# matching kernel (tools/simdjson_stage1.c through the shim that make
# bench builds, target/simdjson/libsimdjson_shim.so; skipped with a note
# when it is missing); and the offsets each writes per block (qjson's
# index entries, simdjson's structurals: qjson also indexes every
# string's closing quote, which is what makes a string's length O(1)).
#
#   tools/stage1_insns.sh [KERNEL...]    default: avx2 scalar
#
# callgrind hides AVX-512, so the avx512 kernel cannot be counted here.
# Where stage 1 runs near the core's peak instructions per cycle, as
# AVX2 does on the corpus, these counts predict its time: docs/benchmarks.md.
# A count is the difference between runs of 30 and 10 scans, over 20, so
# start-up and reading the file cancel. QJSON_DATA names the folder that
# holds corpus/ (default ../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "stage1_insns: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
data=${QJSON_DATA:-../shared/data}
if [ ! -d "$data/corpus" ]; then
    echo "(no corpus at $data/corpus: set QJSON_DATA to the folder that holds it)"
    exit 0
fi
kernels=("$@")
[ ${#kernels[@]} -eq 0 ] && kernels=(avx2 scalar)

cargo build --release --quiet --bench insns
insns=$(ls -t target/release/deps/insns-* | grep -v '\.d$' | head -1)
shim=target/simdjson/libsimdjson_shim.so
driver=""
if [ -f "$shim" ]; then
    driver=target/simdjson/simdjson_stage1
    if [ ! -e "$driver" ] || [ tools/simdjson_stage1.c -nt "$driver" ]; then
        cc -O2 -Wall -Wextra -Werror -o "$driver" tools/simdjson_stage1.c -ldl
    fi
fi

# "INSTRUCTIONS ENTRIES" of `$@ SCANS FILE`: the instructions of 30
# scans minus 10, over 20, and the offsets a scan wrote (the program's
# "entries N" line; "-" when it prints none).
per_scan() {
    local file=$1 a b
    shift
    a=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 10 "$file" 2>&1 |
        awk '/I *refs:/ { gsub(",", "", $4); print $4 }')
    b=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 30 "$file" 2>&1 |
        awk '/I *refs:/ { gsub(",", "", $4); i = $4 } /^entries / { e = $2 }
             END { print i, (e == "" ? "-" : e) }')
    echo $(((${b% *} - a) / 20)) "${b#* }"
}

printf '%-18s %-7s %12s %12s %8s %-9s %12s %8s %7s\n' file kernel "qjson/scan" "qjson/block" \
    "q ent/b" simdjson "sj/block" "sj ent/b" ratio
for name in twitter citm_catalog canada; do
    file=$data/corpus/$name.json
    blocks=$(( ($(stat -c %s "$file") + 63) / 64 ))
    for kernel in "${kernels[@]}"; do
        case $kernel in
        avx2) sj=haswell ;;
        scalar) sj=fallback ;;
        *) sj="" ;;
        esac
        read -r q qe < <(per_scan "$file" "$insns" "$kernel")
        s="" se="-"
        if [ -n "$driver" ] && [ -n "$sj" ]; then
            read -r s se < <(per_scan "$file" "$driver" "$shim" "$sj")
        fi
        awk -v f="$name.json" -v k="$kernel" -v q="$q" -v qe="$qe" -v b="$blocks" -v sj="${sj:--}" \
            -v s="$s" -v se="$se" 'BEGIN {
            qeb = (qe == "-") ? "-" : sprintf("%.2f", qe / b)
            seb = (se == "-") ? "-" : sprintf("%.2f", se / b)
            if (s == "") printf "%-18s %-7s %12d %12.1f %8s %-9s %12s %8s %7s\n", f, k, q, q / b, qeb, "-", "-", "-", "-"
            else printf "%-18s %-7s %12d %12.1f %8s %-9s %12.1f %8s %6.2fx\n", f, k, q, q / b, qeb, sj, s / b, seb, q / s
        }'
    done
done
[ -n "$driver" ] || echo "(no simdjson figures: $shim is missing; make bench builds it)"
echo "(stage 1 alone, instructions per scan and per 64-byte block under $(valgrind --version); ent/b: offsets written per block; ratio = qjson / simdjson instructions)"

#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target of fuzz/ (parse, navigate,
# spans, escape, eager) for FUZZ_SECONDS (default 600) one after the other, seeded from
# the shared JSONTestSuite and corpus files, then the LuaJIT encoder
# splice fuzz (tools/fuzz_encode.lua, target "encode") for as long, and
# prints one line per target with its executions and corpus size.
# Installs the nightly toolchain and cargo-fuzz if they are missing. A
# finding stops the run with the crash input saved under
# fuzz/artifacts/<target>/ (replay: cargo +nightly fuzz run <target> <file>).
#
#   FUZZ_SECONDS=60 FUZZ_TARGETS="parse spans" make fuzz
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-600}
read -r -a targets <<<"${FUZZ_TARGETS:-parse navigate spans escape eager encode}"
data=${QJSON_DATA:-../shared/data}
# Longer inputs are cut when loaded; the big corpus files still seed
# their first 64 KiB of real-world structure.
max_len=${FUZZ_MAX_LEN:-65536}

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi

mkdir -p fuzz/logs
summary=()
for t in "${targets[@]}"; do
    if [ "$t" = encode ]; then
        cargo build --release --quiet
        line=$(luajit tools/fuzz_encode.lua "$seconds") || exit 1
        summary+=("$line")
        continue
    fi
    # The document targets read two option bytes first; "\0\0" is the
    # default options, so each seed is a whole JSON text (escape reads one
    # flag byte and takes the rest as text to escape).
    seeds=fuzz/corpus/$t
    mkdir -p "$seeds"
    for f in "$data"/jsontestsuite/*.json "$data"/corpus/*.json; do
        [ -f "$f" ] || continue
        seed=$seeds/seed-$(basename "$f")
        [ -f "$seed" ] || { printf '\0\0'; cat "$f"; } >"$seed"
    done
    log=fuzz/logs/$t.log
    echo "fuzz: $t for ${seconds}s (log: $log)"
    cargo +nightly fuzz run "$t" -- -max_total_time="$seconds" -max_len="$max_len" \
        -print_final_stats=1 >"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
    runs=$(awk '/^stat::number_of_executed_units:/ { print $2 }' "$log")
    corpus=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -n 1)
    summary+=("$t: $runs executions in ${seconds}s, ${corpus#corp: } corpus inputs/bytes")
done
printf 'fuzz: %s\n' "${summary[@]}"

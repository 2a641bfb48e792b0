#!/usr/bin/env bash
# Two builds of the library timed against each other in one process
# (tools/ab_parse.c): the full validating parse of each FILE (default: the
# corpus), rounds alternating between the builds; B's speed over A's is the
# median over the rounds of the two run back to back.
#
#   tools/ab_parse.sh A B [FILE...]
#   QJSON_KERNEL=avx2 ROUNDS=25 tools/ab_parse.sh HEAD~1 HEAD
#
# A and B are each a built libqjson.so or a git revision, which is built
# (release) under target/ab/<commit>/ the first time. QJSON_KERNEL pins
# both builds' kernel; DUPLICATE_KEYS=error parses under that policy;
# ALIGN=N puts the text N bytes (0-63) past the
# start of a cache line; ALIGN_LOOPS=N builds both revisions with every
# loop starting on an N-byte boundary (under target/ab/<commit>-loopsN/),
# so that a difference is not where the linker happened to place the
# code; run A against itself to see the noise a
# difference has to exceed (docs/benchmarks.md, "Comparing two builds").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
    echo "usage: tools/ab_parse.sh A B [FILE...]   (A, B: libqjson.so or git revision)" >&2
    exit 2
fi

# The library for argument $1: the file itself, or the build of a revision.
library() {
    if [ -f "$1" ]; then
        if [ -n "${ALIGN_LOOPS:-}" ]; then
            echo "ab_parse: $1 is timed as it was built (ALIGN_LOOPS builds revisions)" >&2
        fi
        echo "$1"
        return
    fi
    local commit dir flags=()
    commit=$(git rev-parse --verify --quiet "$1^{commit}") || {
        echo "ab_parse: $1 is neither a file nor a revision" >&2
        exit 2
    }
    dir=target/ab/$commit
    if [ -n "${ALIGN_LOOPS:-}" ]; then
        dir=$dir-loops$ALIGN_LOOPS
        flags=(RUSTFLAGS="-C llvm-args=-align-loops=$ALIGN_LOOPS")
    fi
    if [ ! -f "$dir/target/release/libqjson.so" ]; then
        rm -rf "$dir/src"
        mkdir -p "$dir/src"
        git archive "$commit" | tar -x -C "$dir/src"
        (cd "$dir/src" && env "${flags[@]}" cargo build --release --quiet --target-dir ../target) >&2
    fi
    echo "$dir/target/release/libqjson.so"
}

a=$(library "$1")
b=$(library "$2")
shift 2
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    data=${QJSON_DATA:-../shared/data}
    files=("$data"/corpus/*.json)
fi

driver=target/ab_parse
if [ ! -e "$driver" ] || [ tools/ab_parse.c -nt "$driver" ]; then
    mkdir -p target
    cc -O2 -Wall -Wextra -Werror -o "$driver" tools/ab_parse.c -ldl
fi
for f in "${files[@]}"; do
    "$driver" "$a" "$b" "$f" "${ROUNDS:-25}"
done

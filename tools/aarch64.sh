#!/usr/bin/env bash
# The aarch64 build (NEON kernel), cross-compiled with Debian's Rust and
# run under user-mode emulation (qemu-aarch64): there is no arm64 hardware
# here. `tools/deps.sh cross` installs what it needs.
#
# Usage: tools/aarch64.sh check|test [ARGS...]|clippy|smoke|rock|count [FILE...]
#   check    exit 0 if this machine can do the rest, else print why not
#   test     every cargo test of the crate, built for aarch64, under qemu
#            (ARGS go to cargo test: `test --lib -- scan::` runs a subset)
#   clippy   cargo clippy -D warnings for the aarch64 target (the code
#            behind cfg(target_arch = "aarch64") is not seen on x86)
#   smoke    LuaJIT arm64 (Debian's luajit2:arm64, unpacked into the cache)
#            under qemu: tools/outputs.lua over the corpus and the chat
#            ladder, compared file by file with the same run on x86-64 (TAP)
#   rock     make rock's aarch64 rock (tools/rock.sh, built with zig against
#            glibc 2.17): an aarch64 libqjson.so needing glibc 2.17 at most,
#            whose unpacked modules and library LuaJIT arm64 loads under qemu
#            and runs tools/check_install.lua with (TAP)
#   count    stage-1 guest instructions per input byte, neon beside scalar,
#            for the corpus and the chat ladder (or FILE...), counted by a
#            QEMU plugin (tools/insn_count.c): nothing here is timed
#
# test, clippy and smoke build into target/aarch64 without LTO (a cold
# build of the tests took 4 minutes here with the release profile's fat
# LTO, 1 minute without; the code is the same, only inlining across crates
# differs); count builds the release profile as shipped, into
# target/aarch64-release. Both are cached between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

target=aarch64-unknown-linux-gnu
cache=$root/target/aarch64
if [ "${1:-}" = count ]; then
    export CARGO_TARGET_DIR=$root/target/aarch64-release
else
    export CARGO_TARGET_DIR=$cache
    export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
fi
# rustup's toolchain here has the host's std only; Debian's rustc-web has
# the arm64 one (libstd-rust-web-dev:arm64), and its rustdoc and clippy.
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# -L /: the arm64 std pulls in Debian's libc6:arm64, whose loader and libc
# live in /lib; the cross toolchain's older copy under /usr/aarch64-linux-gnu
# has a loader that does not match that libc (every pthread_create hangs).
qemu=(qemu-aarch64 -L /)
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="${qemu[*]}"
cargo=(/usr/bin/cargo)
release=$CARGO_TARGET_DIR/$target/release
data=${QJSON_DATA:-$root/../shared/data}

# Prints why this machine cannot build and run aarch64 code, if it cannot.
missing() {
    local why=()
    [ -x /usr/bin/rustc ] && [ -d "$(/usr/bin/rustc --print target-libdir --target $target 2>/dev/null)" ] ||
        why+=("Debian's rustc-web with the arm64 std (libstd-rust-web-dev:arm64)")
    command -v aarch64-linux-gnu-gcc >/dev/null || why+=("gcc-aarch64-linux-gnu")
    [ -e /lib/ld-linux-aarch64.so.1 ] || why+=("libc6:arm64")
    command -v qemu-aarch64 >/dev/null || why+=("qemu-user")
    if [ ${#why[@]} -gt 0 ]; then
        echo "missing ${why[*]} (tools/deps.sh cross installs them)"
        return 1
    fi
}

# Builds for aarch64 (cargo build's target selection arguments).
build() {
    "${cargo[@]}" build --release --quiet --target $target "$@"
}

# LuaJIT arm64 unpacked into the cache: Debian's luajit2:arm64 of the same
# version as the installed amd64 one. Installing it would replace that one.
luajit_arm64() {
    local dir=$cache/luajit
    if [ ! -x "$dir/usr/bin/luajit" ]; then
        local version debs
        version=$(dpkg-query -W -f='${Version}' luajit2)
        debs=$(mktemp -d)
        (cd "$debs" && apt-get download -qq "luajit2:arm64=$version" \
            "libluajit2-5.1-2:arm64=$version" 2>/dev/null) || {
            rm -rf "$debs"
            echo "apt-get download luajit2:arm64=$version failed" >&2
            return 1
        }
        mkdir -p "$dir"
        for deb in "$debs"/*.deb; do dpkg -x "$deb" "$dir"; done
        rm -rf "$debs"
    fi
    echo "$dir"
}

# Appends the corpus files to `files`, saying so when they are missing.
corpus() {
    for name in twitter citm_catalog canada; do
        if [ -e "$data/corpus/$name.json" ]; then
            files+=("$data/corpus/$name.json")
        else
            echo "# skipping $name.json: not in $data/corpus (set QJSON_DATA)" >&2
        fi
    done
}

case "${1:-}" in
check)
    missing
    ;;
test)
    "${cargo[@]}" test --release --target $target "${@:2}"
    ;;
clippy)
    PATH=/usr/bin:$PATH "${cargo[@]}" clippy --release --quiet --all-targets --target $target \
        -- -D warnings
    ;;
smoke)
    build --lib
    lj=$(luajit_arm64)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir "$work/payloads" "$work/x86_64" "$work/aarch64"
    luajit benches/payloads.lua "$work/payloads" >/dev/null
    files=()
    corpus
    for rung in 2KB 60KB 100KB 200KB 500KB 1MB 2MB 5MB 10MB; do
        files+=("$work/payloads/chat-$rung.json")
    done
    export LUA_PATH="$root/lua/?.lua;;"
    x86=$(QJSON_LIB=$root/target/release/libqjson.so luajit tools/outputs.lua "$work/x86_64" "${files[@]}")
    arm=$(QJSON_LIB=$release/libqjson.so LD_LIBRARY_PATH=$lj/usr/lib/aarch64-linux-gnu \
        "${qemu[@]}" "$lj/usr/bin/luajit" tools/outputs.lua "$work/aarch64" "${files[@]}")
    echo "# x86-64 ran the $x86 kernel, aarch64 (LuaJIT arm64 under qemu) the $arm kernel"
    n=0
    echo "1..$((${#files[@]} + 1))"
    n=$((n + 1))
    if [ "$arm" = neon ]; then echo "ok $n - aarch64 runs the neon kernel"; else echo "not ok $n - aarch64 runs $arm, not neon"; fi
    for f in "${files[@]}"; do
        name=$(basename "$f")
        n=$((n + 1))
        bad=()
        for kind in reads eager splice; do
            cmp -s "$work/x86_64/$name.$kind" "$work/aarch64/$name.$kind" || bad+=("$kind")
        done
        if [ ${#bad[@]} -eq 0 ]; then
            echo "ok $n - $name: reads, eager decode and re-encode identical on aarch64"
        else
            echo "not ok $n - $name: ${bad[*]} differ between x86-64 and aarch64"
        fi
    done
    ;;
rock)
    lj=$(luajit_arm64)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "1..3"
    if ! rock=$(ROCK_DIR="$work" ARCHES=aarch64 tools/rock.sh 2>"$work/rock.log"); then
        echo "not ok 1 - make rock: the aarch64 rock"
        sed 's/^/# /' "$work/rock.log"
        exit 1
    fi
    echo "ok 1 - make rock: $(basename "$rock")"
    mkdir "$work/tree"
    (cd "$work/tree" && unzip -q "$rock")
    so=$work/tree/lib/libqjson.so
    glibc=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
    if file -b "$so" | grep -q 'ARM aarch64' &&
        [ "$(printf '%s\n2.17\n' "$glibc" | sort -V | tail -1)" = 2.17 ]; then
        echo "ok 2 - the rock's libqjson.so is aarch64 code needing glibc $glibc at most (2.17 allowed)"
    else
        echo "not ok 2 - the rock's libqjson.so: $(file -b "$so"), glibc $glibc"
    fi
    modules=(qjson)
    for f in "$work"/tree/lua/qjson/*.lua; do modules+=("qjson.$(basename "$f" .lua)"); done
    if out=$(cd "$work" && env -i PATH=/usr/bin:/bin LUA_PATH="$work/tree/lua/?.lua" \
        LUA_CPATH="$work/tree/lib/?.so" LD_LIBRARY_PATH="$lj/usr/lib/aarch64-linux-gnu" \
        "${qemu[@]}" "$lj/usr/bin/luajit" "$root/tools/check_install.lua" "$work/tree/" \
        "${modules[@]}" 2>&1) && [[ $out == *"(neon)"* ]]; then
        echo "ok 3 - LuaJIT arm64 loads the rock's modules and library: ${out##*/}"
    else
        echo "not ok 3 - LuaJIT arm64 with the rock's modules and library"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
    ;;
count)
    shift
    build --bench insns
    plugin=$CARGO_TARGET_DIR/insn_count.so
    if [ ! -e "$plugin" ] || [ tools/insn_count.c -nt "$plugin" ]; then
        gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$plugin" tools/insn_count.c
    fi
    files=("$@")
    if [ ${#files[@]} -eq 0 ]; then
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        luajit benches/payloads.lua "$work" >/dev/null
        corpus
        for rung in 2KB 100KB 1MB 10MB; do
            files+=("$work/chat-$rung.json")
        done
    fi
    insns=$(ls -t "$release"/deps/insns-* | grep -v '\.d$' | head -1)
    # Guest instructions of one scan: a run with 3 scans minus one with 1.
    per_scan() {
        local a b
        a=$("${qemu[@]}" -plugin "$plugin" "$insns" "$1" 1 "$2" 2>&1 >/dev/null | sed -n 's/^insns //p')
        b=$("${qemu[@]}" -plugin "$plugin" "$insns" "$1" 3 "$2" 2>&1 >/dev/null | sed -n 's/^insns //p')
        echo $(((b - a) / 2))
    }
    printf '%-14s %9s %12s %14s %7s\n' payload bytes "neon insn/B" "scalar insn/B" ratio
    for f in "${files[@]}"; do
        bytes=$(stat -c %s "$f")
        neon=$(per_scan neon "$f")
        scalar=$(per_scan scalar "$f")
        awk -v name="$(basename "$f" .json)" -v bytes="$bytes" -v n="$neon" -v s="$scalar" \
            'BEGIN { printf "%-14s %9d %12.2f %14.2f %6.1fx\n", name, bytes, n / bytes, s / bytes, s / n }'
    done
    echo "(stage 1 alone, guest instructions per input byte under qemu-aarch64 $("${qemu[@]}" --version |
        sed -n 's/^qemu-aarch64 version \([^ ]*\).*/\1/p'), default CPU; ratio = scalar / neon)"
    ;;
*)
    echo "usage: $0 check|test|clippy|smoke|rock|count [FILE...]" >&2
    exit 2
    ;;
esac

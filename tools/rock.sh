#!/usr/bin/env bash
# `make rock`: binary rocks for machines without a Rust toolchain,
#   target/rocks/qjson-<version>-1.linux-x86_64.rock
#   target/rocks/qjson-<version>-1.linux-aarch64.rock  (when Debian's Rust
#                                                       has the arm64 std)
# each holding the Lua modules and a prebuilt libqjson.so. The library is
# linked with zig (cargo-zigbuild) against glibc 2.17's symbols, so it
# loads on any glibc distribution from 2014 on; one build per architecture
# serves every CPU of it (kernels are chosen at run time).
#
# Installs what it needs: zig and cargo-zigbuild (both from PyPI).
# Environment: ROCK_DIR (default target/rocks); ARCHES (default
# "x86_64 aarch64").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

version=$(sed -n 's/^ *_VERSION = "\(.*\)",$/\1/p' lua/qjson.lua)
rockspec="rockspec/qjson-$version-1.rockspec"
out=${ROCK_DIR:-$PWD/target/rocks}
mkdir -p "$out"
rocks=(luarocks --lua-version=5.1)

# pip_install PACKAGE: from PyPI, into Python's scripts directory, which
# is put on PATH below.
pip_install() {
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt-get install -y -qq python3-pip >&2
    fi
    # Debian's own Python refuses system-wide pip installs unless told.
    python3 -m pip install -q "$1" >&2 2>/dev/null ||
        python3 -m pip install -q --break-system-packages "$1" >&2
}
PATH="$PATH:$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
if ! python3 -m ziglang version >/dev/null 2>&1; then
    echo "rock: installing zig (pip install ziglang)" >&2
    pip_install ziglang
fi
if ! command -v cargo-zigbuild >/dev/null; then
    # PyPI's wheel is the prebuilt binary: `cargo install` compiles it,
    # which took most of the three minutes of this step on a new machine.
    echo "rock: installing cargo-zigbuild (pip install cargo-zigbuild)" >&2
    pip_install cargo-zigbuild || cargo install --locked --quiet cargo-zigbuild >&2
fi

# build ARCH: prints the path of libqjson.so for ARCH, linked for glibc
# 2.17; fails when this machine cannot build for ARCH.
build() {
    local arch=$1 target="$1-unknown-linux-gnu"
    local rustc=rustc
    if [ "$arch" != "$(uname -m)" ]; then
        # rustup here has the host's std only; Debian's rustc-web has the
        # arm64 one (libstd-rust-web-dev:arm64).
        rustc=/usr/bin/rustc
        [ -d "$($rustc --print target-libdir --target "$target" 2>/dev/null)" ] || return 1
    fi
    # A linker, runner or profile set for cross builds (tools/aarch64.sh
    # sets some) must not reach this build: zig links it, as shipped.
    local var unset=()
    for var in $(compgen -e | grep -E '^CARGO_(TARGET_|PROFILE_|BUILD_)'); do
        unset+=(-u "$var")
    done
    env "${unset[@]}" RUSTC=$rustc CARGO_TARGET_DIR=target/zigbuild cargo zigbuild --release \
        --quiet --target "$target.2.17" >&2
    echo "target/zigbuild/$target/release/libqjson.so"
}

for arch in ${ARCHES:-x86_64 aarch64}; do
    if ! so=$(build "$arch"); then
        echo "rock: skipping linux-$arch: no Rust standard library for it here" \
             "(tools/deps.sh cross installs Debian's)" >&2
        continue
    fi
    tree=$(mktemp -d)
    QJSON_PREBUILT=$PWD/$so "${rocks[@]}" --tree="$tree" make "$rockspec" --deps-mode=none \
        LUA_INCDIR=/usr/include/luajit-2.1 >&2
    # luarocks names the rock after this machine whatever its contents, so
    # each arch packs in a directory of its own (packing in $out, the
    # aarch64 rock was first written over the x86-64 one's name).
    packdir=$(mktemp -d)
    packed=$(cd "$packdir" && "${rocks[@]}" --tree="$tree" pack qjson "$version-1" |
             sed -n 's/^Packed: //p')
    rock="$out/qjson-$version-1.linux-$arch.rock"
    mv "$packed" "$rock"
    rm -rf "$tree" "$packdir"
    echo "$rock"
done

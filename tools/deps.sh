#!/usr/bin/env bash
# Installs what `make test` / `make bench` need on a fresh Debian 12 machine.
#
# Usage: tools/deps.sh test|bench|cross
#
#   cross   what tools/aarch64.sh needs: Debian's Rust (rustc-web: its arm64
#           std, rustdoc and clippy; rustup's toolchain has only the host's
#           std), the aarch64 cross linker, and qemu-user (the dynamic build:
#           the static one cannot load the instruction-counting plugin)
#
# Only missing packages are installed. LuaJIT comes from `luajit2` (OpenResty's
# branch); the `luajit` / `libluajit-5.1-dev` packages conflict with it and
# would remove the nginx Lua module, so they are never requested here (nor
# luajit2:arm64, which would replace the amd64 one: tools/aarch64.sh unpacks
# it into its cache instead).
set -euo pipefail

want=(luajit2 libluajit2-5.1-dev lua-busted lua-cjson lua-check valgrind perl build-essential curl ca-certificates locales
      nginx libnginx-mod-http-lua lua-resty-core)
mode=${1:-test}
case "$mode" in
    test) want+=(luarocks) ;;
    bench) want+=(gnuplot-nox wrk) ;;
    cross) want=(rustc-web cargo-web rust-web-clippy libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu
                 libc6-dev-arm64-cross qemu-user) ;;
    *) echo "usage: $0 test|bench|cross" >&2; exit 2 ;;
esac

missing=()
for pkg in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then
        sudo=()
    elif command -v sudo >/dev/null; then
        sudo=(sudo)
    else
        echo "deps: missing ${missing[*]}; run as root or install them" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ "$mode" = cross ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        "${sudo[@]}" dpkg --add-architecture arm64
    fi
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Rust: the toolchain the crate is built with (stable, with clippy and rustfmt).
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null; then
    echo "deps: installing the Rust toolchain with rustup"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt
fi

#!/usr/bin/env bash
# Installs what `make test` / `make bench` need on a fresh Debian 12 machine.
#
# Usage: tools/deps.sh test|bench
#
# Only missing packages are installed. LuaJIT comes from `luajit2` (OpenResty's
# branch); the `luajit` / `libluajit-5.1-dev` packages conflict with it and
# would remove the nginx Lua module, so they are never requested here.
set -euo pipefail

want=(luajit2 libluajit2-5.1-dev lua-busted lua-cjson lua-check valgrind perl build-essential curl ca-certificates
      nginx libnginx-mod-http-lua lua-resty-core)
case "${1:-test}" in
    test) want+=(luarocks) ;;
    bench) want+=(gnuplot-nox wrk) ;;
    *) echo "usage: $0 test|bench" >&2; exit 2 ;;
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

#!/usr/bin/env bash
# Installs qjson the ways README's Install section describes (both
# rockspecs through luarocks, `make install` with PREFIX and with DESTDIR)
# into temporary trees, then loads each copy from a directory outside the
# repository in a clean environment (nothing but the tree's paths; no
# QJSON_LIB, no LD_LIBRARY_PATH) with tools/check_install.lua, under LuaJIT
# and inside nginx (tools/nginx-lua --no-repo). Prints TAP.
#
# Needs luarocks (Debian's, for Lua 5.1), nginx and a built checkout; the
# Makefile's `test` target provides them.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
outside="$work/elsewhere"
mkdir "$outside"

# luarocks for LuaJIT: Lua 5.1's ABI, LuaJIT's headers (only checked for,
# nothing is compiled against them), no rocks server.
rocks=(luarocks --lua-version=5.1)
rocks_vars=(LUA_INCDIR=/usr/include/luajit-2.1)

modules=(qjson)
for f in lua/qjson/*.lua; do
    name=${f#lua/}
    name=${name%.lua}
    modules+=("${name//\//.}")
done

n=0
failed=0
# t DESCRIPTION COMMAND...: one TAP line; the command's output, as TAP
# comments, only when it fails.
t() {
    local desc=$1
    shift
    n=$((n + 1))
    if "$@" >"$work/log" 2>&1; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
        failed=$((failed + 1))
        sed 's/^/# /' "$work/log"
    fi
}

# A command run from outside the repository with an empty environment but
# for PATH, HOME and the given VAR=VALUE settings.
clean() {
    (cd "$outside" && env -i HOME="$HOME" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@")
}

# check_in_tree TREE: check_install.lua under LuaJIT and in nginx, with
# only `luarocks path` for TREE set.
check_in_tree() {
    local tree=$1 paths
    paths=$("${rocks[@]}" --tree="$tree" path) || return 1
    clean bash -c "$paths"'; exec "$@"' _ \
        luajit "$repo/tools/check_install.lua" "$tree/" "${modules[@]}"
}
check_in_tree_nginx() {
    local tree=$1 paths
    paths=$("${rocks[@]}" --tree="$tree" path) || return 1
    clean bash -c "$paths"'; exec "$@"' _ \
        "$repo/tools/nginx-lua" --no-repo "$repo/tools/check_install.lua" "$tree/" "${modules[@]}"
}

# check_in_prefix PREFIX [RUNNER...]: check_install.lua with LUA_PATH and
# LUA_CPATH pointed at a `make install` prefix.
check_in_prefix() {
    local prefix=$1
    shift
    clean LUA_PATH="$prefix/share/lua/5.1/?.lua;;" LUA_CPATH="$prefix/lib/lua/5.1/?.so;;" \
        "${@:-luajit}" "$repo/tools/check_install.lua" "$prefix/" "${modules[@]}"
}

version=$(sed -n 's/^ *_VERSION = "\(.*\)",$/\1/p' lua/qjson.lua)
versioned="rockspec/qjson-$version-1.rockspec"
t "a rockspec for _VERSION $version with that version" \
    grep -qx "version = \"$version-1\"" "$versioned"
t "luarocks lint rockspec/qjson-scm-1.rockspec" "${rocks[@]}" lint rockspec/qjson-scm-1.rockspec
t "luarocks lint $versioned" "${rocks[@]}" lint "$versioned"

for spec in rockspec/qjson-scm-1.rockspec "$versioned"; do
    tree="$work/tree-$(basename "$spec" .rockspec)"
    t "luarocks make $spec" \
        "${rocks[@]}" --tree="$tree" make "$spec" --deps-mode=none "${rocks_vars[@]}"
    t "LuaJIT loads qjson from the $spec tree" check_in_tree "$tree"
    t "nginx loads qjson from the $spec tree" check_in_tree_nginx "$tree"
done

prefix="$work/prefix"
t "make install PREFIX=..." make --no-print-directory install PREFIX="$prefix"
t "LuaJIT loads qjson from the make install prefix" check_in_prefix "$prefix"
t "nginx loads qjson from the make install prefix" \
    check_in_prefix "$prefix" "$repo/tools/nginx-lua" --no-repo

stage="$work/stage"
t "make install PREFIX=/usr DESTDIR=..." make --no-print-directory install PREFIX=/usr DESTDIR="$stage"
t "LuaJIT loads qjson from the DESTDIR staging tree" check_in_prefix "$stage/usr"

# The binary rock (make rock): installed where no Rust toolchain can run
# (cargo and rustc on PATH are stubs that fail the test if called), loaded
# in LuaJIT and nginx; its libqjson.so asks for no glibc newer than 2.17.
rock_dir="$work/rocks"
if rock=$(ROCK_DIR="$rock_dir" ARCHES=x86_64 tools/rock.sh 2>"$work/rock.log"); then
    echo "ok $((n += 1)) - make rock: $(basename "$rock")"
    stubs="$work/no-rust"
    mkdir -p "$stubs"
    for tool in cargo rustc rustup; do
        printf '#!/bin/sh\necho "%s must not run" >&2\nexit 1\n' "$tool" >"$stubs/$tool"
        chmod +x "$stubs/$tool"
    done
    tree="$work/tree-binary-rock"
    t "luarocks install $(basename "$rock") without a Rust toolchain" \
        env PATH="$stubs:/usr/local/bin:/usr/bin:/bin" \
        "${rocks[@]}" --tree="$tree" install "$rock" --deps-mode=none
    t "LuaJIT loads qjson from the binary rock's tree" check_in_tree "$tree"
    t "nginx loads qjson from the binary rock's tree" check_in_tree_nginx "$tree"
    newest_glibc() {
        objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1
    }
    glibc=$(newest_glibc "$tree/lib/lua/5.1/libqjson.so")
    at_most_2_17() { [ "$(printf '%s\n2.17\n' "$glibc" | sort -V | tail -1)" = 2.17 ]; }
    t "the rock's libqjson.so needs glibc $glibc at most (2.17 allowed)" at_most_2_17
else
    echo "not ok $((n += 1)) - make rock"
    failed=$((failed + 1))
    sed 's/^/# /' "$work/rock.log"
fi

# The check can fail: without its libqjson.so, an installed copy must not
# quietly load the checkout's.
rm "$prefix/lib/lua/5.1/libqjson.so"
fails() { ! "$@"; }
t "an install without libqjson.so fails the check" fails check_in_prefix "$prefix"

echo "1..$n"
[ "$failed" -eq 0 ]

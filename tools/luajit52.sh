#!/usr/bin/env bash
# Builds OpenResty's LuaJIT branch with Lua 5.2 compatibility
# (-DLUAJIT_ENABLE_LUA52COMPAT), the way OpenResty ships it, and prints the
# interpreter's path. The source is Debian's luajit2 package, the same
# release as the installed luajit; the build happens once, into
# target/luajit52 (about a minute), and is reused after.
set -euo pipefail
cd "$(dirname "$0")/.."

out=$PWD/target/luajit52
if [ -x "$out/bin/luajit" ]; then
    echo "$out/bin/luajit"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
# apt-get source needs deb-src entries; Debian's image has only deb.
sources=/etc/apt/sources.list.d/qjson-deb-src.sources
if ! apt-get source --print-uris -qq luajit2 >/dev/null 2>&1; then
    echo "luajit52: enabling Debian's deb-src entries ($sources)" >&2
    "${sudo[@]}" tee "$sources" >/dev/null <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    "${sudo[@]}" apt-get update -qq >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$(dpkg-query -W -f='${Version}' luajit2)
echo "luajit52: building luajit2 $version with LUAJIT_ENABLE_LUA52COMPAT into $out" >&2
(cd "$work" && apt-get source --download-only -qq "luajit2=$version" >&2)
tar -xf "$work"/luajit2_*.orig.tar.* -C "$work"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
make -C "$src" -j"$(nproc)" PREFIX="$out" XCFLAGS=-DLUAJIT_ENABLE_LUA52COMPAT >"$work/build.log" 2>&1 || {
    tail -20 "$work/build.log" >&2
    exit 1
}
make -C "$src" install PREFIX="$out" >"$work/install.log" 2>&1
# Releases of the 2.1 branch install luajit-2.1.x; name it plainly.
if [ ! -x "$out/bin/luajit" ]; then
    ln -sf "$(basename "$(ls "$out"/bin/luajit-* | head -1)")" "$out/bin/luajit"
fi
"$out/bin/luajit" -e 'assert(#setmetatable({}, { __len = function() return 1 end }) == 1,
    "built without Lua 5.2 compatibility")'
echo "$out/bin/luajit"

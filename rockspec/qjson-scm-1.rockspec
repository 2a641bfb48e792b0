-- qjson from a checkout, built and installed by `make install`:
--   luarocks --lua-version=5.1 make rockspec/qjson-scm-1.rockspec --deps-mode=none \
--       LUA_INCDIR=/usr/include/luajit-2.1
-- run from the repository root (luarocks make builds the current directory).
rockspec_format = "3.0"
package = "qjson"
version = "scm-1"
-- `luarocks make` builds the checkout it runs in and never reads the
-- source; a copy uploaded to a rocks server must name the published
-- repository here instead.
source = {
   url = "git+file://.",
}
description = {
   summary = "Strict, lazy JSON for LuaJIT and OpenResty, with a Rust SIMD core",
   detailed = [[
qjson validates JSON against RFC 8259 with a SIMD structural index and reads
values out of the original bytes only when asked: path getters
(qjson.parse), cjson-shaped lazy tables (qjson.decode), a cjson-identical
encoder that copies untouched input byte for byte, and a Server-Sent Events
reader (qjson.sse). Needs LuaJIT 2.1 (its FFI) and Rust to build.
]],
   license = "MIT",
   labels = { "json", "luajit", "openresty", "ffi", "sse" },
}
dependencies = {
   "lua == 5.1",
}
build = {
   -- `make install` builds libqjson.so with cargo and installs it into the
   -- rock's lib directory, which luarocks deploys on package.cpath. No
   -- build pass: the default make target runs `make test`'s apt-based
   -- dependency installer.
   type = "make",
   build_pass = false,
   install_variables = {
      LUA_DIR = "$(LUADIR)",
      LIB_DIR = "$(LIBDIR)",
   },
}

-- The native binding: the cdef, loading libqjson, the null value, the
-- kernel and the version. Some checks need a fresh process (different
-- environment, nothing loaded yet): those run a child luajit.

local ffi = require("ffi")
local qjson = require("qjson")
local qffi = require("qjson.ffi")
local helper = require("helper")

-- The repository root, from this file's own path (busted runs from it).
local ROOT = (function()
    local source = debug.getinfo(1, "S").source:gsub("^@", "")
    local dir = source:match("^(.*)/spec/[^/]*$") or "."
    local p = assert(io.popen('cd "' .. dir .. '" && pwd'))
    local abs = p:read("*l")
    p:close()
    return abs
end)()

local function shell_quote(s)
    return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- Runs `script` in a child luajit from the repository root, with `env`
-- (name -> value) added to the environment. Returns its combined
-- stdout and stderr, and its exit status.
local function run_child(script, env)
    local file = os.tmpname()
    local f = assert(io.open(file, "wb"))
    f:write(script)
    f:close()
    local vars = {}
    for k, v in pairs(env or {}) do
        vars[#vars + 1] = k .. "=" .. shell_quote(v)
    end
    table.sort(vars)
    local cmd = "cd " .. shell_quote(ROOT) .. " && env " .. table.concat(vars, " ")
                .. " luajit " .. shell_quote(file) .. ' 2>&1; echo "exit=$?"'
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    os.remove(file)
    local body, status = out:match("^(.*)exit=(%d+)\n$")
    return body, tonumber(status)
end

-- The start of a child script that loads the modules from `dir`/lua.
local function prelude(dir)
    return "package.path = " .. string.format("%q", dir .. "/lua/?.lua") .. "\n"
end

describe("qjson.ffi", function()
    it("declares exactly the cdef block of include/qjson.h", function()
        local header = helper.read(ROOT .. "/include/qjson.h")
        local _, count = header:gsub("/%* qjson%-cdef%-begin %*/", "")
        assert.equal(1, count)
        local block = header:match("/%* qjson%-cdef%-begin %*/\n(.-)/%* qjson%-cdef%-end %*/")
        assert.is_string(block)
        assert.is_true(#block > 1000)
        assert.is_string(qffi.cdef)
        if qffi.cdef ~= block then
            -- Name the first differing line instead of dumping both texts.
            local a, b = {}, {}
            for line in (qffi.cdef .. "\n"):gmatch("(.-)\n") do a[#a + 1] = line end
            for line in (block .. "\n"):gmatch("(.-)\n") do b[#b + 1] = line end
            for i = 1, math.max(#a, #b) do
                if a[i] ~= b[i] then
                    error(string.format("cdef differs from include/qjson.h at line %d:\n"
                                        .. "  ffi.lua: %s\n  qjson.h: %s",
                                        i, tostring(a[i]), tostring(b[i])))
                end
            end
            error("cdef differs from include/qjson.h (line endings or trailing bytes)")
        end
    end)

    it("resolves every declared function in the loaded library", function()
        for name in qffi.cdef:gmatch("(qjson_[%w_]+)%(") do
            assert.is_true(pcall(function() return qffi.C[name] end), name)
        end
    end)

    -- (lua/qjson/lazy.lua tells an object that repeats a key this way.)
    it("counts members with and without repeated keys in one qjson_len call", function()
        local cases = {
            { '{"a":1,"b":2,"a":3}', 2, 3 },
            { '{"a":1,"b":2}', 2, 2 },
            { '{"k":1,"\\u006b":2,"k":3}', 1, 3 },
            { '{}', 0, 0 },
            { '[1,[2,3],4]', 3, 3 },
        }
        for _, case in ipairs(cases) do
            local text, distinct, members = case[1], case[2], case[3]
            local R = qffi.enter()
            local ptr = qffi.C.qjson_parse(text, #text, nil, R)
            assert.is_true(ptr ~= nil, text)
            local rc = qffi.C.qjson_len(ptr, 0, nil, 0, R)
            local got = { rc, tonumber(R.value.len), tonumber(R.value.i64) }
            qffi.C.qjson_free(ptr)
            qffi.leave(R)
            assert.same({ qffi.C.QJSON_OK, distinct, members }, got, text)
        end
    end)

    -- (lua/qjson/lazy.lua finds where a written member is this way.)
    it("gives a member's source text and cursor in one qjson_raw_key call", function()
        local text = '{"a": [1, 2] ,"b":"x\\n","a":{"c":null}, "d" : 1.5e3}'
        local cases = {
            { "a", qffi.C.QJSON_OK, '{"c":null}' },  -- the last of a repeated key
            { "b", qffi.C.QJSON_OK, '"x\\n"' },
            { "d", qffi.C.QJSON_OK, "1.5e3" },
            { "c", qffi.C.QJSON_NOT_FOUND },
        }
        local R = qffi.enter()
        local ptr = qffi.C.qjson_parse(text, #text, nil, R)
        assert.is_true(ptr ~= nil)
        for _, case in ipairs(cases) do
            local key, want_rc, want_raw = case[1], case[2], case[3]
            local rc = qffi.C.qjson_raw_key(ptr, 0, key, #key, R)
            assert.equal(want_rc, rc, key)
            if want_raw then
                local v = R.value
                assert.equal(want_raw, ffi.string(v.str, v.len), key)
                -- The cursor is the member's, as qjson_get_key finds it.
                local cursor = v.cursor
                assert.equal(qffi.C.QJSON_OK, qffi.C.qjson_get_key(ptr, 0, key, #key, R))
                assert.equal(cursor, R.value.cursor, key)
            end
        end
        assert.equal(qffi.C.QJSON_BAD_CURSOR, qffi.C.qjson_raw_key(ptr, 2, "a", 1, R))
        local array = "[1]"
        local aptr = qffi.C.qjson_parse(array, #array, nil, R)
        assert.equal(qffi.C.QJSON_NOT_FOUND, qffi.C.qjson_raw_key(aptr, 0, "a", 1, R))
        qffi.C.qjson_free(aptr)
        qffi.C.qjson_free(ptr)
        qffi.leave(R)
    end)
end)

describe("the shared reader", function()
    it("gives back a read's memory over 1 MiB after a cycle that did not need it", function()
        -- A string that decodes to 2 MiB, into the reader's memory.
        local d = qjson.parse('["' .. ("\\n"):rep(2 ^ 21) .. '"]')
        assert.equal(2 ^ 21, #d:get_str("[0]"))
        for _ = 1, 2 do
            collectgarbage()
            -- The parse that sweeps after the cycle.
            qjson.parse("[1]")
        end
        -- Had the sweeps not trimmed it, this would find the 2 MiB.
        assert.is_true(tonumber(qffi.C.qjson_reader_trim(qffi.main)) <= 2 ^ 20)
        assert.equal("\n\n", d:get_str("[0]"):sub(1, 2))
    end)
end)

describe("loading libqjson", function()
    -- A copy of lua/ outside the repository, so the build-tree fallback
    -- (lua/qjson/../../target/release) finds nothing either.
    local tmp

    setup(function()
        tmp = os.tmpname()
        os.remove(tmp)
        assert(os.execute("mkdir -p " .. shell_quote(tmp .. "/lua/qjson")
                          .. " && cp " .. shell_quote(ROOT .. "/lua/qjson.lua") .. " "
                          .. shell_quote(tmp .. "/lua/") .. " && cp "
                          .. shell_quote(ROOT .. "/lua/qjson/") .. "*.lua "
                          .. shell_quote(tmp .. "/lua/qjson/")))
    end)

    teardown(function()
        if tmp then
            os.execute("rm -rf " .. shell_quote(tmp))
        end
    end)

    local function load_error(lib, cpath)
        local out, status = run_child(prelude(tmp)
            .. "package.cpath = " .. string.format("%q", cpath) .. "\n"
            .. 'local ok, err = pcall(require, "qjson")\n'
            .. "io.write(ok and 'loaded' or err)\n",
            { QJSON_LIB = lib, LD_LIBRARY_PATH = "" })
        assert.equal(0, status, out)
        return out
    end

    it("lists every place it looked when the library is nowhere", function()
        local out = load_error("/nonexistent/libqjson.so", "")
        local dir = tmp .. "/lua/qjson/"
        assert.equal(table.concat({
            "qjson: cannot load the native library; tried:",
            "  /nonexistent/libqjson.so (not found)",
            "  " .. dir .. "libqjson.so (not found)",
            "  " .. dir .. "../libqjson.so (not found)",
            "  " .. dir .. "../../target/release/libqjson.so (not found)",
        }, "\n"), (out:match("^(.-)\n  libqjson%.so via the dynamic linker")))
        assert.matches("\n  libqjson%.so via the dynamic linker %(.+%)$", out)
    end)

    it("looks on package.cpath and reports files that fail to load", function()
        local out = load_error(ROOT .. "/include/qjson.h", "/nowhere/?.so;/also/?/here.so")
        assert.matches("tried:\n  " .. (ROOT .. "/include/qjson.h"):gsub("%p", "%%%0")
                       .. " %(.+%)\n", out)
        assert.is_nil(out:find(ROOT .. "/include/qjson.h (not found)", 1, true))
        assert.truthy(out:find("\n  /nowhere/libqjson.so (not found)\n", 1, true))
        assert.truthy(out:find("\n  /also/libqjson/here.so (not found)\n", 1, true))
    end)

    it("uses $QJSON_LIB when it names the library", function()
        local lib = qjson.library_path
        if not lib:find("/", 1, true) then
            pending("libqjson was found by the dynamic linker, not by path")
            return
        end
        if lib:sub(1, 1) ~= "/" then
            lib = ROOT .. "/" .. lib
        end
        local out, status = run_child(prelude(tmp)
            .. 'local q = require("qjson")\n'
            .. 'io.write(q.library_path, " ", q.parse("[7]"):get_f64("[0]"))\n',
            { QJSON_LIB = lib, LD_LIBRARY_PATH = "" })
        assert.equal(0, status, out)
        assert.equal(lib .. " 7", out)
    end)
end)

describe("qjson.null", function()
    local cjson = require("cjson")

    it("is the NULL light userdata, equal to cjson.null", function()
        assert.equal("userdata", type(qjson.null))
        assert.equal("userdata: NULL", tostring(qjson.null))
        assert.is_true(ffi.cast("void *", qjson.null) == nil)
        assert.is_true(rawequal(cjson.null, qjson.null))
        assert.is_true(rawequal(qjson.null, require("qjson.safe").null))
    end)

    it("is the same table key as cjson.null", function()
        local t = { [cjson.null] = "from cjson" }
        assert.equal("from cjson", t[qjson.null])
        t[qjson.null] = "from qjson"
        assert.equal("from qjson", t[cjson.null])
        local n = 0
        for _ in pairs(t) do n = n + 1 end
        assert.equal(1, n)
        assert.equal(cjson.null, qjson.parse("[null]"):get("[0]"))
    end)

    it("needs no cjson, and matches it when cjson is loaded later", function()
        local out, status = run_child(prelude(ROOT) .. [[
local ffi = require("ffi")
local q = require("qjson")
print(package.loaded.cjson == nil, tostring(q.null), ffi.cast("void *", q.null) == nil)
local cjson = require("cjson")
local t = { [q.null] = 1 }
print(rawequal(q.null, cjson.null), t[cjson.null])
]])
        assert.equal(0, status, out)
        assert.equal("true\tuserdata: NULL\ttrue\ntrue\t1\n", out)
    end)

    it("is ngx.null under OpenResty", function()
        local out, status = run_child(prelude(ROOT) .. [[
local sentinel = function() end
ngx = { null = sentinel } -- luacheck: ignore
print(require("qjson").null == sentinel)
]])
        assert.equal(0, status, out)
        assert.equal("true\n", out)
    end)
end)

describe("qjson.kernel", function()
    it("names the kernel in use, the one QJSON_KERNEL forces when set", function()
        local forced = os.getenv("QJSON_KERNEL")
        if forced and forced ~= "" then
            assert.equal(forced, qjson.kernel())
        else
            local known = { avx512 = true, avx2 = true, neon = true, scalar = true }
            assert.truthy(known[qjson.kernel()])
        end
        assert.equal(qjson.kernel(), require("qjson.safe").kernel())
    end)

    it("can always be forced to scalar", function()
        local out, status = run_child(prelude(ROOT) .. [[
local q = require("qjson")
print(q.kernel(), q.parse('{"a":[1,"x"]}'):get_str("a[1]"))
]], { QJSON_KERNEL = "scalar" })
        assert.equal(0, status, out)
        assert.equal("scalar\tx\n", out)
    end)

    it("makes parse fail clearly for an unknown QJSON_KERNEL", function()
        local out, status = run_child(prelude(ROOT) .. [[
local q = require("qjson")
print(q.kernel())
print(pcall(q.parse, "[1]"))
print(require("qjson.safe").parse("[1]"))
]], { QJSON_KERNEL = "sse9000" })
        assert.equal(0, status, out)
        local lines = {}
        for line in out:gmatch("(.-)\n") do lines[#lines + 1] = line end
        assert.equal(3, #lines, out)
        assert.matches("^nil\tqjson: QJSON_KERNEL names a kernel", lines[1])
        assert.matches("^false\tqjson: unknown or unsupported kernel in QJSON_KERNEL", lines[2])
        assert.matches("^nil\tqjson: unknown or unsupported kernel in QJSON_KERNEL", lines[3])
    end)
end)

describe("versions", function()
    it("agree between the Lua modules and the library", function()
        local native = ffi.string(qffi.C.qjson_version())
        assert.matches("^%d+%.%d+%.%d+", native)
        assert.equal(native, qjson._VERSION)
        assert.equal(native, require("qjson.safe")._VERSION)
        assert.equal(native, require("qjson.doc")._VERSION)
    end)
end)

describe("the C library's locale", function()
    it("leaves numbers written with '.' when its decimal point is ','", function()
        -- The Lua encoder writes the numbers LuaJIT's formatter rounds
        -- otherwise than cjson with snprintf (see put_number), which
        -- writes the locale's decimal point. de_DE is built from the
        -- locale sources (Debian's `locales`) into a directory of its own.
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir -p " .. shell_quote(dir)))
        local built = os.execute("localedef -i de_DE -f UTF-8 "
                                 .. shell_quote(dir .. "/de_DE.UTF-8") .. " >/dev/null 2>&1")
        local out = run_child(prelude(ROOT) .. [[
            local ffi = require("ffi")
            local qjson = require("qjson")
            assert(os.setlocale("de_DE.UTF-8", "numeric"), "no de_DE locale")
            local halfway = 440103099353365.5
            local b = ffi.new("char[32]")
            io.write(ffi.string(b, ffi.C.snprintf(b, 32, "%.14g", halfway)), "\n")
            local t = qjson.decode('{"a":1,"b":[2]}')
            t.a, t.b[1] = halfway, -2.5e-300
            io.write(qjson.encode(t), "\n")
            qjson.encode_number_precision(16)
            t.a = 0.5
            io.write(qjson.encode(t), "\n")
        ]], { LOCPATH = dir })
        os.execute("rm -rf " .. shell_quote(dir))
        assert.truthy(built == true or built == 0, "localedef failed")
        assert.equal('4,4010309935337e+14\n{"a":4.4010309935337e+14,"b":[-2.5e-300]}\n'
                     .. '{"a":0.5,"b":[-2.5e-300]}\n', out)
    end)
end)

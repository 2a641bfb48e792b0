-- Shared by the specs: where the shared test data lives, small builders
-- for large documents, and OpenResty's lua-cjson fork to compare with.

local qjson = require("qjson")
local is_proxy = require("qjson.lazy").is_proxy

local _M = {}

-- The JSONTestSuite and corpus files: $QJSON_DATA, else ../shared/data
-- beside the repository, else /work/shared/data.
function _M.data_dir()
    local candidates = { os.getenv("QJSON_DATA") or "", "../shared/data", "/work/shared/data" }
    for _, dir in ipairs(candidates) do
        if dir ~= "" then
            local f = io.open(dir .. "/corpus/twitter.json", "rb")
            if f then
                f:close()
                return dir
            end
        end
    end
    error("test data not found: set QJSON_DATA to the directory holding corpus/ and jsontestsuite/")
end

-- OpenResty's lua-cjson fork, loaded beside Debian's (its own module
-- table), or nil: looked for as $QJSON_CJSON_FORK (make test sets it:
-- `tools/baselines.sh cjson`), $BASELINES/cjson.so, then
-- target/baselines/cjson.so (tools/baselines.sh builds it there).
function _M.fork()
    local baselines = os.getenv("BASELINES")
    for _, path in ipairs({ os.getenv("QJSON_CJSON_FORK") or "",
                            baselines and baselines .. "/cjson.so" or "",
                            "target/baselines/cjson.so" }) do
        local f = path ~= "" and io.open(path, "rb")
        if f then
            f:close()
            local open = package.loadlib(path, "luaopen_cjson")
            local fork = open and open()
            if fork then
                return fork
            end
        end
    end
    return nil
end

-- The outcome of encoding v: the text, or "error: " and the message.
function _M.outcome(f, v)
    local ok, s = pcall(f, v)
    return ok and s or "error: " .. tostring(s)
end

-- The outcome of fork.encode(v) (see `outcome`) with qjson's metatables
-- and empty array swapped for the fork's in place (a copy could iterate in
-- another order), then put back.
function _M.fork_encode(fork, v)
    local undo = {}
    local seen = {}
    local function swap(t)
        if type(t) ~= "table" or seen[t] or is_proxy(t) or t == qjson.empty_array then
            return
        end
        seen[t] = true
        local mt = getmetatable(t)
        if mt == qjson.array_mt or mt == qjson.empty_array_mt then
            setmetatable(t, mt == qjson.array_mt and fork.array_mt or fork.empty_array_mt)
            undo[#undo + 1] = function() setmetatable(t, mt) end
        end
        for k, x in next, t do
            if x == qjson.empty_array then
                rawset(t, k, fork.empty_array)
                undo[#undo + 1] = function() rawset(t, k, x) end
            else
                swap(x)
            end
        end
    end
    if v == qjson.empty_array then
        v = fork.empty_array
    end
    swap(v)
    local s = _M.outcome(fork.encode, v)
    for i = #undo, 1, -1 do undo[i]() end
    return s
end

-- An encode error of lua-cjson as OpenResty's fork words it: Debian's
-- lua-cjson 2.1.0 (what the specs load as cjson) ends its message for NaN
-- and infinities in "NaN or Inf", the fork (and qjson) in "NaN or Infinity".
function _M.fork_message(message)
    return (message:gsub("must not be NaN or Inf$", "must not be NaN or Infinity"))
end

function _M.read(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("*a")
    f:close()
    return s
end

-- The file names in a directory (no subdirectories), sorted.
function _M.list(dir)
    local p = assert(io.popen('ls -1 "' .. dir .. '"'))
    local names = {}
    for name in p:lines() do
        names[#names + 1] = name
    end
    p:close()
    table.sort(names)
    return names
end

-- The plain tables the FFI builder makes of `proxy` (lazy.tape_value, in
-- a reader section of its own), every array with `arrays_mt` when given:
-- what qjson.materialize builds for an unchanged proxy that is not small,
-- and the oracle of the native builds.
function _M.tape_of(proxy, arrays_mt)
    local lazy = require("qjson.lazy")
    local qffi = require("qjson.ffi")
    local st, code = lazy.proxy_info(proxy)
    local R = qffi.enter()
    local ok, v = pcall(lazy.tape_value, lazy.live_ptr(st), lazy.cursor_of(code), R, arrays_mt)
    qffi.leave(R)
    if not ok then
        error(v, 0)
    end
    return v
end

-- `text` made long enough (trailing whitespace) that its document is a
-- native one of its own, tracked and freed by lua/qjson/doc.lua, rather
-- than a small one (see "Small documents" in docs/architecture.md).
function _M.pooled(text)
    local C = require("qjson.ffi").C
    return text .. string.rep(" ", C.QJSON_SMALL_MAX_BYTES + 1 - #text)
end

-- n plain tables, each the only element of the one before, and the
-- innermost (an empty table).
function _M.nested_tables(n)
    local t = {}
    local at = t
    for _ = 1, n do
        at[1] = {}
        at = at[1]
    end
    return t, at
end

-- A deterministic chat-completion request of about `bytes` bytes: each
-- message has a short text part and a base64 image part.
function _M.chat_request(bytes, messages)
    messages = messages or 4
    local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    local seed = 12345
    local image_len = math.max(16, math.ceil(bytes / messages) - 100)
    local parts = {}
    for i = 1, messages do
        -- A random 4 KB block, repeated: fast to build, still base64.
        local chars = {}
        for k = 1, math.min(image_len, 4096) do
            seed = (seed * 1103515245 + 12345) % 2147483648
            local c = seed % 64 + 1
            chars[k] = alphabet:sub(c, c)
        end
        local block = table.concat(chars)
        local image = string.rep(block, math.ceil(image_len / #block)):sub(1, image_len)
        parts[i] = string.format(
            '{"role":"user","content":[{"type":"text","text":"message %d"},'
            .. '{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,%s"}}]}',
            i, image)
    end
    return '{"model":"gpt-4o","temperature":0.7,"max_tokens":512,"messages":['
           .. table.concat(parts, ",") .. "]}"
end

-- Linear time, tested by a ratio of sizes in one process: `run(make(n), n)`
-- and `run(make(4 * n), 4 * n)` timed alternately, best of ROUNDS, each
-- sample repeated until long enough to time; 4x the size must cost at most
-- MAX_RATIO times as much (linear work gives about 4x, quadratic 16x).
-- Up to ATTEMPTS measurements, for a moment of load on the machine: a
-- quadratic loop fails every one. Keep n small enough for both working
-- sets to stay in the CPU's caches, or the ratio measures the memory
-- hierarchy rather than the algorithm. (MAX_RATIO was 6 until a
-- fresh-clone `make test` on the shared machine measured 6.3x in all four
-- attempts for a loop that measures 4.1-5.1x here alone, at this commit
-- and the one before; 8 still fails anything quadratic by a factor of 2.)
local MAX_RATIO, ROUNDS, ATTEMPTS = 8, 5, 4

-- CPU seconds of `reps` runs of `run(input, n)`.
local function cpu_time(run, input, n, reps)
    collectgarbage()
    local t0 = os.clock()
    for _ = 1, reps do
        run(input, n)
    end
    return os.clock() - t0
end

local function growth(make, run, n)
    local small, big = make(n), make(4 * n)
    local reps = 1
    while cpu_time(run, small, n, reps) < 0.005 do
        reps = reps * 2
    end
    local ts, tb = math.huge, math.huge
    for _ = 1, ROUNDS do
        ts = math.min(ts, cpu_time(run, small, n, reps))
        tb = math.min(tb, cpu_time(run, big, 4 * n, reps))
    end
    return tb / ts, ts, tb
end

function _M.assert_linear(make, run, n)
    local ratio, ts, tb
    for _ = 1, ATTEMPTS do
        ratio, ts, tb = growth(make, run, n)
        if ratio <= MAX_RATIO then
            return
        end
    end
    error(("%d -> %d: %.4f s -> %.4f s, %.1fx (at most %dx)")
          :format(n, 4 * n, ts, tb, ratio, MAX_RATIO), 2)
end

return _M

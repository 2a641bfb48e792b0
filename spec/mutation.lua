-- The seeded proxy-mutation machinery shared by differential_spec and
-- tools/fuzz_encode.lua: documents to mutate (a chat request, repeated
-- keys, a tweet), random writes to decoded proxies mirrored on a plain
-- cjson model, and run_mutations, which re-encodes after every round and
-- checks the output against the model. Everything draws from
-- math.random: seed it first. Failures raise with the seed and the
-- writes so far.

local qjson = require("qjson")
local lazy = require("qjson.lazy")
local cjson = require("cjson")
local helper = require("helper")
local gen = require("gen")

local DATA = helper.data_dir()
local null = qjson.null
local random = math.random
local show = gen.show
local random_string, random_number = gen.random_string, gen.random_number
local obj, arr, num, TRUE, FALSE, NULL = gen.obj, gen.arr, gen.num, gen.TRUE, gen.FALSE, gen.NULL

local _M = {}

-- A deleted array element in a model: the proxy keeps it as a hole that
-- encodes as null, and removing the last element also drops the holes
-- before it.
local HOLE = setmetatable({}, { __tostring = function() return "HOLE" end })

local function normalize(v)
    if v == HOLE or v == cjson.null then return null end
    return v
end

local function assert_deep_equal(expected, actual, context)
    local ok, where = gen.deep_equal(expected, actual, normalize)
    assert(ok, (context and context .. ": " or "") .. tostring(where))
end

-- What cjson makes of v: its decoding of its encoding.
local function canon(v)
    return cjson.decode(cjson.encode(v))
end

-- Documents for the mutation specs ------------------------------------------

local BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(n)
    local chars = {}
    for i = 1, n do
        local c = random(64)
        chars[i] = BASE64:sub(c, c)
    end
    return table.concat(chars)
end

-- A chat-completion request, pretty-printed, with escaped keys and keys
-- that need escaping in a JSON Pointer.
local function chat_request()
    local messages = { obj({ { "role", "system" }, { "content", "Be brief. \"Quote\" / \\" } }) }
    for i = 1, random(2, 6) do
        local content
        if random() < 0.5 then
            content = "message " .. i .. " caf\xc3\xa9 \xf0\x9f\x98\x80\n\tend"
        else
            content = arr({
                obj({ { "type", "text" }, { "text", "look at </this> \1\31" } }),
                obj({ { "type", "image_url" },
                      { "image_url", obj({ { "url", "data:image/png;base64," .. base64(60) },
                                           { "detail", "low" } }) } }),
            })
        end
        local members = { { "role", i % 2 == 1 and "user" or "assistant" }, { "content", content } }
        if random() < 0.3 then
            members[#members + 1] = { "tool_calls", arr({ obj({
                { "id", "call_" .. i }, { "type", "function" },
                { "function", obj({ { "name", "get_weather" },
                                    { "arguments", '{"city": "Paris", "days": 3}' } }) },
            }) }) }
        end
        messages[#messages + 1] = obj(members)
    end
    return obj({
        { "model", "gpt-4o" },
        { "temperature", num(({ "0.7", "7e-1", "0.70", "1", "-0" })[random(5)]) },
        { "max_tokens", num("512") },
        { "stream", FALSE },
        { "stop", random() < 0.5 and NULL or arr({ "\n\n", "END" }) },
        { "messages", arr(messages) },
        { "tools", arr({ obj({ { "type", "function" }, { "function", obj({
            { "name", "get_weather" },
            { "parameters", obj({ { "type", "object" }, { "properties", obj({
                { "city", obj({ { "type", "string" } }) },
                { "days", obj({ { "type", "integer" }, { "minimum", num("1") } }) },
            }) }, { "required", arr({ "city" }) } }) },
        }) } }) }) },
        { "logit_bias", obj({ { "50256", num("-100") }, { "1234", num("2.5E+1") } }) },
        { "metadata", obj({ { "a.b", num("1") }, { "x/y", num("2") }, { "t~0", num("3") },
                            { "", num("4") }, { "quo\"te", TRUE }, { "tab\tkey", NULL },
                            { "caf\xc3\xa9", "\xf0\x9f\x98\x80" }, { "[0]", arr({}) },
                            { "empty", obj({}) } }) },
        { "user", "user/\xc3\xa9" },
        { "n", num("1") },
    })
end

-- Repeated keys at several depths, also spelled differently ("a\u002eb"
-- is "a.b").
local DUPLICATES = [[
{"id": 1, "id": 2,
 "user": {"name": "a", "name": "b", "tags": ["x"]},
 "list": [{"k": 1, "k": {"deep": [1, 2, {"k": 3, "k": 4}], "deep": [5]}}, {"k": null}],
 "user": {"name": "c", "roles": ["admin", "ops"], "meta": {"x": 1, "x": [1, 2]}},
 "a\u002eb": {"v": 1}, "a.b": {"v": 2},
 "empty": {}, "none": [], "nulls": [null, null],
 "tail": "end", "tail": "END"
}]]

local TWITTER = helper.read(DATA .. "/corpus/twitter.json")

local TWEET = qjson.parse(TWITTER):raw("/statuses/3")

-- The texts "another proxy" values are taken from in the current run (one
-- tweet of twitter.json rather than all of it, to keep documents small),
-- and cjson's decoding of each text (read only: chosen parts are copied).
local donors
local donor_models = {}

-- Mutation --------------------------------------------------------------------

local function is_proxy(v)
    return type(v) == "table" and lazy.is_proxy(v)
end

local function is_array_proxy(p)
    return lazy.is_array(p)
end

local function deep_copy(v)
    if type(v) ~= "table" then return v end
    local out = {}
    for k, e in next, v do out[k] = deep_copy(e) end
    return out
end

-- The keys (document order, then added order) or indices of the proxy's
-- children that are proxies themselves (only those with at most `max`
-- members when given).
local function proxy_children(p, max)
    local kids = {}
    local function consider(k, v)
        if is_proxy(v) and (not max or qjson.len(v) <= max) then kids[#kids + 1] = k end
    end
    if is_array_proxy(p) then
        for i = 1, qjson.len(p) do consider(i, p[i]) end
    else
        for k, v in qjson.pairs(p) do consider(k, v) end
    end
    return kids
end

-- From (p, m), descends into proxy children, stopping at each level with
-- probability `stop`. Returns the proxy, the model and the path.
local function descend(p, m, stop)
    local path = {}
    while random() >= stop do
        local kids = proxy_children(p)
        if #kids == 0 then break end
        local k = kids[random(#kids)]
        p, m = p[k], m[k]
        path[#path + 1] = k
        if type(m) ~= "table" then
            error("the model has " .. show(m) .. " where the proxy has a container at "
                  .. table.concat(path, "/"), 0)
        end
    end
    return p, m, path
end

-- A path from `descend` as text: "/messages/1/content".
local function path_text(path)
    local at = {}
    for i, k in ipairs(path) do at[i] = tostring(k) end
    return "/" .. table.concat(at, "/")
end

-- Strings whose cjson round trip is exact: valid UTF-8 with escapes.
local function random_text()
    return random_string(10, false)
end

-- A number whose "%.14g" form reads back as itself.
local function random_exact_number()
    return tonumber(("%.14g"):format(random_number()))
end

local function random_scalar()
    local r = random()
    if r < 0.4 then return random_text() end
    if r < 0.8 then return random_exact_number() end
    if r < 0.9 then return random() < 0.5 end
    return null
end

-- A plain table that materialize and cjson agree on: no holes, string
-- keys, exact numbers.
local function random_plain(depth)
    depth = (depth or 0) + 1
    local t = {}
    local n = random(0, 4)
    local as_array = random() < 0.5
    for i = 1, n do
        local r = random()
        local v
        if depth < 3 and r < 0.3 then
            v = random_plain(depth)
        elseif r < 0.35 then
            v = qjson.empty_array
        else
            v = random_scalar()
        end
        if as_array then t[i] = v else t[random_text() .. i] = v end
    end
    return t
end

-- A clean proxy for a part of a freshly decoded donor text, its model and
-- where it comes from.
local function random_donor()
    local which = random(#donors)
    local text = donors[which]
    donor_models[text] = donor_models[text] or cjson.decode(text)
    local p, m, path = descend(qjson.decode(text), donor_models[text], 0.4)
    return p, deep_copy(m), "donor " .. which .. " at " .. path_text(path)
end

local NEW_KEYS = { "new", "a.b", "x/y", "t~0", "~1", "", 'quo"te', "back\\slash", "ctl\1\31",
                   "tab\t", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "\127", "[0]", "id", "text",
                   "messages", "name", "k", "deep", "nul\0key" }

-- A value to write: the proxy's value, the model's, and a description.
local function random_write()
    local r = random()
    if r < 0.5 then
        local v = random_scalar()
        return v, v, "scalar " .. show(v)
    elseif r < 0.75 then
        local t = random_plain()
        return t, canon(t), "plain table " .. show(cjson.encode(t))
    elseif r < 0.8 then
        -- A plain table holding a proxy.
        local p, m, what = random_donor()
        return { p, "x" }, { m, "x" }, "{ proxy of " .. what .. ", \"x\" }"
    end
    local p, m, what = random_donor()
    return p, m, "proxy of " .. what
end

-- One random write to the container (p, m) found at `path`; records the
-- top-level key it touches in `touched`. Returns a description.
local function mutate(p, m, path, touched)
    local function touch(k) touched[path[1] or k] = true end
    local r = random()
    if is_array_proxy(p) then
        local n = qjson.len(p)
        assert(n == #m, ("length %d, model length %d"):format(n, #m))
        -- qjson.pairs: every element but the holes, in order, as pairs
        -- goes past a plain table's hole (qjson.ipairs stops at it).
        local seen, want = {}, {}
        for i in qjson.pairs(p) do seen[#seen + 1] = i end
        for i = 1, n do
            if m[i] ~= HOLE then want[#want + 1] = i end
        end
        assert(table.concat(seen, ",") == table.concat(want, ","),
               ("qjson.pairs gave [%s], the model has [%s]"):format(
                   table.concat(seen, ","), table.concat(want, ",")))
        if n > 0 and r < 0.35 then
            local i = random(n)
            local v, mv, what = random_write()
            p[i], m[i] = v, mv
            assert(rawequal(p[i], v), "reads back another value")
            touch(i)
            return ("[%d] = %s"):format(i, what)
        elseif r < 0.6 then
            local v, mv, what = random_write()
            p[n + 1], m[n + 1] = v, mv
            assert(rawequal(p[n + 1], v) and qjson.len(p) == n + 1, "append not seen")
            touch(n + 1)
            return ("append [%d] = %s"):format(n + 1, what)
        elseif n > 0 and r < 0.75 then
            p[n] = nil
            m[n] = nil
            while #m > 0 and m[#m] == HOLE do m[#m] = nil end
            assert(p[n] == nil and qjson.len(p) == #m, "the removed element is still there")
            touch(n)
            return ("[%d] = nil (last)"):format(n)
        elseif n > 1 and r < 0.85 then
            local i = random(n - 1)
            p[i], m[i] = nil, HOLE
            assert(p[i] == nil and qjson.len(p) == n, "the hole reads as a value")
            touch(i)
            return ("[%d] = nil (hole)"):format(i)
        elseif r < 0.9 then
            p[n + 1] = nil
            assert(qjson.len(p) == n, "appending nil changed the length")
            touch(n + 1)
            return ("[%d] = nil (past the end)"):format(n + 1)
        end
        local kids = proxy_children(p, 30)
        if #kids > 0 and n > 0 then
            -- The same proxy at a second place (with its own changes).
            local from, to = kids[random(#kids)], random(n + 1)
            p[to], m[to] = p[from], m[from]
            touch(from)
            touch(to)
            return ("[%d] = [%d]"):format(to, from)
        end
        return "nothing"
    end
    local keys = {}
    for k in qjson.pairs(p) do keys[#keys + 1] = k end
    local count = 0
    for _ in next, m do count = count + 1 end
    assert(#keys == count and qjson.len(p) == count,
           ("%d keys, length %d, model has %d"):format(#keys, qjson.len(p), count))
    if #keys > 0 and r < 0.45 then
        local k = keys[random(#keys)]
        local v, mv, what = random_write()
        p[k], m[k] = v, mv
        assert(rawequal(p[k], v), "reads back another value")
        touch(k)
        return ("[%s] = %s"):format(show(k), what)
    elseif r < 0.65 then
        -- Mostly a key that is there, sometimes one that may not be.
        local k = (#keys > 0 and random() < 0.8) and keys[random(#keys)]
                  or NEW_KEYS[random(#NEW_KEYS)]
        p[k], m[k] = nil, nil
        assert(p[k] == nil, "the deleted key still reads as a value")
        touch(k)
        return ("[%s] = nil"):format(show(k))
    elseif r < 0.9 then
        local k = random() < 0.5 and NEW_KEYS[random(#NEW_KEYS)] or random_text()
        local v, mv, what = random_write()
        p[k], m[k] = v, mv
        assert(rawequal(p[k], v), "reads back another value")
        touch(k)
        return ("[%s] = %s (add)"):format(show(k), what)
    end
    local kids = proxy_children(p, 30)
    if #kids > 0 then
        local from = kids[random(#kids)]
        local to = random() < 0.5 and keys[random(#keys)] or NEW_KEYS[random(#NEW_KEYS)]
        p[to], m[to] = p[from], m[from]
        touch(from)
        touch(to)
        return ("[%s] = [%s]"):format(show(to), show(from))
    end
    return "nothing"
end

-- RFC 6901: "~" is "~0", "/" is "~1".
local function pointer(key)
    return "/" .. key:gsub("~", "~0"):gsub("/", "~1")
end

-- Random rounds of writes on a decoded `text`; after each round the
-- encoding must decode (by cjson and by qjson) to the model.
local function run_mutations(text, seed, rounds, donor_texts, unique_keys)
    donors = donor_texts
    local proxy, model = qjson.decode(text), cjson.decode(text)
    assert(is_proxy(proxy) and next(model) ~= nil, "the document is not a non-empty object")
    local doc = qjson.parse(text)
    local sources = {}
    for k in next, model do sources[k] = doc:raw(pointer(k)) end
    local lead, trail = text:match("^[ \t\r\n]*"), text:match("[ \t\r\n]*$")
    local touched, log = {}, {}
    local function context(round, step)
        return ("seed %d, round %d, step %d; writes so far:\n  %s\n"):format(
            seed, round, step, table.concat(log, "\n  "))
    end
    for round = 1, rounds do
        for step = 1, random(1, 6) do
            local ok, err = pcall(function()
                local p, m, path = descend(proxy, model, random() < 0.3 and 0.1 or 0.5)
                local what = mutate(p, m, path, touched)
                log[#log + 1] = path_text(path) .. " " .. what
            end)
            assert(ok, context(round, step) .. tostring(err))
        end
        if round % 2 == 0 then
            -- The proxies of the steps above are held by nothing but
            -- their change records: the collector takes the others from
            -- the document's registry (lua/qjson/lazy.lua), and the next
            -- round's reads make them anew.
            collectgarbage()
        end
        local where = context(round, 0)
        -- A container below the root first, encoded and materialized
        -- before the root is: from the edits of the change records inside
        -- it (lua/qjson/edits.lua, `edits_for`), not the document's.
        local sub, sub_model, sub_path = descend(proxy, model, 0.3)
        local sub_where = where .. "at " .. path_text(sub_path) .. ": "
        local sub_out = qjson.encode(sub)
        local sub_ok, sub_decoded = pcall(cjson.decode, sub_out)
        assert(sub_ok, sub_where .. "cjson cannot decode the output: " .. tostring(sub_decoded))
        assert_deep_equal(sub_model, sub_decoded, sub_where .. "cjson.decode(encode(proxy))")
        assert_deep_equal(sub_model, qjson.materialize(sub), sub_where .. "materialize(proxy)")
        local out = qjson.encode(proxy)
        assert(out == qjson.encode(proxy), where .. "a second encode differs")
        local pieces, len = qjson.encode_pieces(proxy)
        assert(table.concat(pieces) == out and len == #out,
               where .. "encode_pieces differs from encode")
        local ok, decoded = pcall(cjson.decode, out)
        assert(ok, where .. "cjson cannot decode the output: " .. tostring(decoded))
        assert_deep_equal(model, decoded, where .. "cjson.decode(encode(proxy))")
        assert_deep_equal(model, qjson.decode(out, { lazy = false }),
                          where .. "qjson.decode(encode(proxy))")
        assert_deep_equal(model, qjson.materialize(proxy), where .. "materialize(proxy)")
        if unique_keys then
            -- Writes leave one member per key: no repeated key appears.
            local ok_unique, err = pcall(qjson.parse, out, { duplicate_keys = "error" })
            assert(ok_unique, where .. tostring(err))
        end
        assert(out:sub(1, #lead) == lead and out:sub(#out - #trail + 1) == trail,
               where .. "the whitespace around the root changed")
        for k, raw in next, sources do
            if not touched[k] then
                assert(out:find(raw, 1, true),
                       where .. "untouched " .. show(k) .. " lost its source text " .. show(raw))
            end
        end
    end
end

_M.assert_deep_equal = assert_deep_equal
_M.chat_request = chat_request
_M.DUPLICATES = DUPLICATES
_M.TWITTER = TWITTER
_M.TWEET = TWEET
_M.run_mutations = run_mutations

return _M

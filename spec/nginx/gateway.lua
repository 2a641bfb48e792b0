-- examples/gateway in a real nginx, through curl: what the upstream
-- receives (its SHA-256, length and Content-Length), and that rejected
-- requests never reach it. Run by tools/gateway-test, which starts nginx
-- and sets GATEWAY_PORT, UPSTREAM_PORT and WORK_DIR (a scratch directory).

local cjson = require("cjson")
local safe = require("qjson.safe")
local helper = require("helper")

local GATEWAY = "http://127.0.0.1:" .. assert(os.getenv("GATEWAY_PORT"), "GATEWAY_PORT unset")
                .. "/v1/chat/completions"
local UPSTREAM = "http://127.0.0.1:" .. assert(os.getenv("UPSTREAM_PORT"))
local WORK = assert(os.getenv("WORK_DIR"))
local DATA = helper.data_dir()
local MB = 1024 * 1024

local function write(path, s)
    local f = assert(io.open(path, "wb"))
    f:write(s)
    f:close()
end

local function run(cmd)
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    return out
end

local function sha256(s)
    local path = WORK .. "/expected"
    write(path, s)
    return run("sha256sum " .. path):match("^(%x+)")
end

-- POSTs body to the gateway; returns the status and the response body.
local function post(body)
    local req, resp = WORK .. "/request", WORK .. "/response"
    write(req, body)
    local status = run(string.format(
        "curl -sS -H 'Content-Type: application/json' -H 'Expect:' --data-binary @%s"
        .. " -o %s -w '%%{http_code}' %s", req, resp, GATEWAY))
    return tonumber(status), helper.read(resp)
end

local function upstream_requests()
    return tonumber(run("curl -sS " .. UPSTREAM .. "/requests"))
end

-- Sends body and checks that the upstream received exactly `expected`.
local function assert_forwarded(body, expected)
    local status, answer = post(body)
    assert.equal(200, status, answer)
    local seen = cjson.decode(answer)
    assert.equal(#expected, seen.bytes)
    assert.equal(tostring(#expected), seen.content_length)
    assert.equal(sha256(expected), seen.sha256)
end

-- Sends body and checks the gateway answers `status` with `message` and
-- forwards nothing.
local function assert_rejected(body, status, message)
    local before = upstream_requests()
    local got, answer = post(body)
    assert.equal(status, got, answer)
    assert.equal(message, cjson.decode(answer).error.message)
    assert.equal(before, upstream_requests())
end

-- A corpus file with "model" added as its first member: the rest is the
-- file's own bytes, whitespace included.
local function with_model(name)
    local text = helper.read(DATA .. "/corpus/" .. name .. ".json")
    assert(text:sub(1, 1) == "{")
    return '{"model":"gpt-4o",' .. text:sub(2)
end

local function replace(s, from, to)
    local i, j = assert(s:find(from, 1, true))
    assert(not s:find(from, j + 1, true), "ambiguous replacement")
    return s:sub(1, i - 1) .. to .. s:sub(j + 1)
end

describe("the gateway forwards an untouched body byte for byte", function()
    for _, name in ipairs({ "twitter", "citm_catalog", "canada" }) do
        it(name .. ".json", function()
            local body = with_model(name)
            assert_forwarded(body, body)
        end)
    end
    it("a 1 MB chat request (temp file)", function()
        local body = helper.chat_request(MB)
        assert_forwarded(body, body)
    end)
    it("a 10 MB chat request (temp file)", function()
        local body = helper.chat_request(10 * MB)
        assert.is_true(#body >= 10 * MB)
        assert_forwarded(body, body)
    end)
    it("a small request (in memory)", function()
        local body = '{ "model" : "o3-mini" ,"max_tokens":4096, "messages":[] }'
        assert_forwarded(body, body)
    end)
end)

describe("a rewritten body differs only in the rewritten values", function()
    local ROUTED = '"model":"gpt-4o-mini-2024-07-18"'

    it("a routed model, 1 MB", function()
        local body = replace(helper.chat_request(MB), '"model":"gpt-4o"', '"model":"gpt-4o-mini"')
        assert_forwarded(body, replace(body, '"model":"gpt-4o-mini"', ROUTED))
    end)
    it("a routed model, 10 MB", function()
        local body = replace(helper.chat_request(10 * MB), '"model":"gpt-4o"',
                             '"model":"gpt-4o-mini"')
        assert_forwarded(body, replace(body, '"model":"gpt-4o-mini"', ROUTED))
    end)
    it("max_tokens above the cap is clamped", function()
        local body = replace(helper.chat_request(MB), '"max_tokens":512', '"max_tokens":100000')
        assert_forwarded(body, replace(body, '"max_tokens":100000', '"max_tokens":4096'))
    end)
    it("both at once, with the key spelled with an escape", function()
        local body = '{"mod\\u0065l" : "gpt-4o-mini",\n "max_tokens": 5000, "n": 1.50 }'
        local expected = '{"mod\\u0065l" : "gpt-4o-mini-2024-07-18",\n'
                         .. ' "max_tokens": 4096, "n": 1.50 }'
        assert_forwarded(body, expected)
    end)
end)

describe("the allow-list cannot be bypassed", function()
    it("a model not on the list", function()
        assert_rejected('{"model":"gpt-5-secret"}', 403, "model not allowed: gpt-5-secret")
    end)
    it("an escaped key", function()
        assert_rejected('{"mod\\u0065l":"gpt-5-secret"}', 403, "model not allowed: gpt-5-secret")
    end)
    it("an escaped value", function()
        assert_rejected('{"model":"gpt-5-s\\u0065cret"}', 403, "model not allowed: gpt-5-secret")
    end)
    it("a repeated key, allowed copy first", function()
        assert_rejected('{"model":"gpt-4o","model":"gpt-5-secret"}', 400,
                        'qjson: duplicate key "model" at byte 18')
    end)
    it("a repeated key, allowed copy last", function()
        assert_rejected('{"model":"gpt-5-secret","model":"gpt-4o"}', 400,
                        'qjson: duplicate key "model" at byte 24')
    end)
    it("a repeated key spelled two ways", function()
        assert_rejected('{"model":"gpt-4o","mod\\u0065l":"gpt-5-secret"}', 400,
                        'qjson: duplicate key "mod\\u0065l" at byte 18')
    end)
    it("a repeated key deeper in a large body", function()
        local first = '"role":"user","content":[{"type":"text","text":"message 1"}'
        local body = replace(helper.chat_request(MB), first, '"role":"system",' .. first)
        local _, err = safe.decode(body, { duplicate_keys = "error" })
        assert.matches("^qjson: duplicate key \"role\" at byte %d+$", err)
        assert_rejected(body, 400, err)
    end)
    it("a model that is not a string", function()
        assert_rejected('{"model":["gpt-4o"]}', 400, "model must be a string")
        assert_rejected('{"model":null}', 400, "model must be a string")
        assert_rejected('["gpt-4o"]', 400, "model must be a string")
        assert_rejected('"gpt-4o"', 400, "request body must be a JSON object")
    end)
    it("a max_tokens that is not a positive integer", function()
        for _, v in ipairs({ "-1", "0", "1.5", '"100"', "1e400", "null" }) do
            assert_rejected('{"model":"gpt-4o","max_tokens":' .. v .. "}", 400,
                            "max_tokens must be a positive integer")
        end
    end)
end)

describe("invalid JSON gets a 400 with qjson's message and is not forwarded", function()
    local function check(body)
        local _, err = safe.decode(body)
        assert.is_string(err)
        assert_rejected(body, 400, err)
    end
    it("a truncated 1 MB request (temp file)", function()
        local body = helper.chat_request(MB)
        check(body:sub(1, #body - 3))
    end)
    it("a truncated small request", function()
        check('{"model":"gpt-4o","messages":[{"role":"us')
    end)
    it("trailing garbage", function()
        check('{"model":"gpt-4o"} x')
    end)
    it("invalid UTF-8 that cjson would accept", function()
        check('{"model":"gpt-4o","x":"\255"}')
    end)
    it("an empty body", function()
        assert_rejected("", 400, "request body is empty")
    end)
end)

describe("the gateway meters a streamed response", function()
    local STREAM = GATEWAY:gsub("/v1/chat/completions$", "/v1/stream")

    it("passes every event on and reads each one's delta and usage", function()
        local direct = run("curl -sS '" .. UPSTREAM .. "/v1/stream?events=50'")
        local through = run("curl -sS '" .. STREAM .. "?events=50'")
        -- The upstream's bytes, then the filter's closing comment: 50
        -- events (and [DONE]), 47 words " wordN" (N = 2..48), 60 tokens.
        local content = 0
        for i = 2, 48 do content = content + #(" word" .. i) end
        assert.equal(direct .. (": gateway events=50 content_bytes=%d total_tokens=60\n\n")
                     :format(content), through)
    end)
end)

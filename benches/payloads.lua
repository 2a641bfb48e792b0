-- Deterministic benchmark payloads (no downloads): the chat-completion
-- request ladder, one in Chinese, one of source code, a GitHub-API-shaped
-- response and the events of a streamed chat completion. The same
-- arguments always give the same bytes.
--
--   luajit benches/payloads.lua DIR     writes each payload to DIR/<name>.json
--                                        and prints the paths (for the native
--                                        benchmark)

local ffi = require("ffi")
local bit = require("bit")

local band, bxor, lshift, rshift = bit.band, bit.bxor, bit.lshift, bit.rshift
local concat, format, char, byte, rep = table.concat, string.format, string.char, string.byte,
    string.rep

local _M = {}

local B64 = ffi.new("const char[64]",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

-- A xorshift32 step: the next state.
local function xorshift(x)
    x = bxor(x, lshift(x, 13))
    x = bxor(x, rshift(x, 17))
    return bxor(x, lshift(x, 5))
end

-- `n` base64 characters from a xorshift32 generator seeded with `seed`.
function _M.base64(n, seed)
    local buf = ffi.new("char[?]", n)
    local x = seed
    for i = 0, n - 1 do
        x = xorshift(x)
        buf[i] = B64[band(x, 63)]
    end
    return ffi.string(buf, n)
end

-- The realistic small request: pretty-printed, system/user/assistant
-- turns, a tool definition and metadata, about 2 KB.
local SMALL = [[
{
  "model": "gpt-4o",
  "temperature": 0.7,
  "max_tokens": 1024,
  "stream": false,
  "user": "user-8f2c1a",
  "messages": [
    {
      "role": "system",
      "content": [
        { "type": "text", "text": "You are a helpful assistant for an online store. Answer briefly, cite order numbers exactly, and never invent tracking data." }
      ]
    },
    {
      "role": "user",
      "content": [
        { "type": "text", "text": "Hi! Where is my order #A-20931? It was supposed to arrive on Tuesday." }
      ]
    },
    {
      "role": "assistant",
      "content": [
        { "type": "text", "text": "Let me look that up for you. I will check the carrier status and the warehouse dispatch log, then come back with the latest delivery estimate." }
      ],
      "tool_calls": [
        {
          "id": "call_7Hq2",
          "type": "function",
          "function": { "name": "get_order_status", "arguments": "{\"order_id\":\"A-20931\"}" }
        }
      ]
    },
    {
      "role": "user",
      "content": [
        { "type": "text", "text": "Also, can I change the delivery address to 12 Rue de la Paix, Paris? Merci \u00e0 vous !" }
      ]
    }
  ],
  "tools": [
    {
      "type": "function",
      "function": {
        "name": "get_order_status",
        "description": "Look up the shipping status of an order by its id.",
        "parameters": {
          "type": "object",
          "properties": {
            "order_id": { "type": "string", "description": "The order number, e.g. A-12345" },
            "include_history": { "type": "boolean", "default": false }
          },
          "required": ["order_id"]
        }
      }
    }
  ],
  "tool_choice": "auto",
  "response_format": { "type": "text" },
  "top_p": 1,
  "presence_penalty": 0,
  "frequency_penalty": 0.2,
  "seed": 42,
  "stop": ["\n\nUser:", "<|end|>"],
  "logit_bias": { "50256": -100, "198": -2.5 },
  "metadata": { "tenant": "shop-eu-1", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "priority": 3 }
}
]]

-- A chat-completion request of about `bytes` bytes. From 60 KB up each
-- message has a short text part and a base64 image part, about one 1 MB
-- image per MB; below that it is the realistic 2 KB request.
function _M.chat(bytes)
    if bytes < 10e3 then
        return SMALL
    end
    local messages = math.max(1, math.floor(bytes / 1e6 + 0.5))
    local image_len = math.floor(bytes / messages) - 160
    local parts = {}
    for i = 1, messages do
        parts[i] = format('{"role":"user","content":[{"type":"text","text":"Describe image %d."},'
            .. '{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,%s"}}]}',
            i, _M.base64(image_len, 2463534242 + i))
    end
    return '{"model":"gpt-4o","temperature":0.7,"max_tokens":512,"messages":['
        .. concat(parts, ",") .. "]}"
end

-- The UTF-8 bytes of the CJK ideograph U+4E00 + `k` (k < 4096).
local function ideograph(k)
    local c = 0x4e00 + k
    return char(0xe0 + rshift(c, 12), 0x80 + band(rshift(c, 6), 0x3f), 0x80 + band(c, 0x3f))
end

-- A chat-completion request of about `bytes` bytes whose messages are
-- text in Chinese (CJK ideographs, 3 bytes each, up to 400 per message),
-- as a gateway in front of a Chinese-language model sees them.
function _M.chat_cjk(bytes)
    local messages, size, x = {}, 40, 88172645
    while size < bytes do
        x = xorshift(x)
        local chars = {}
        for i = 1, 20 + band(x, 0x7fffffff) % 380 do
            x = xorshift(x)
            chars[i] = ideograph(band(x, 0x7fffffff) % 3000)
        end
        local role = #messages % 2 == 0 and "user" or "assistant"
        messages[#messages + 1] = format('{"role":"%s","content":"%s。"}', role, concat(chars))
        size = size + #messages[#messages] + 1
    end
    return '{"model":"qwen-max","messages":[' .. concat(messages, ",") .. "]}"
end

local CODE_WORDS = {
    "local", "function", "return", "end", "if", "then", "else", "for", "in", "pairs",
    "do", "nil", "true", "self", "ngx.ctx", "body", "json.decode(body)", "req", "==", "=",
    "ngx.log(ngx.ERR,", "#messages", "tostring(x)", "..", "(n + 1)", "ok, err",
}

-- A chat-completion request of about `bytes` bytes whose user message
-- asks about source code, as a coding assistant sends it: JSON escapes
-- on every line (`\n`, some indents as `\t`, string literals as
-- `\"...\"`, a `\\` now and then), about one every 20 bytes.
function _M.chat_code(bytes)
    local lines, size, x = {}, 200, 2654435761
    while size < bytes do
        x = xorshift(x)
        local r = band(x, 0x7fffffff)
        local line = { r % 4 == 0 and "\\t" or string.rep("    ", r % 3) }
        for i = 2, 3 + r % 7 do
            x = xorshift(x)
            line[i] = CODE_WORDS[band(x, 0x7fffffff) % #CODE_WORDS + 1]
        end
        if r % 5 == 0 then
            line[#line + 1] = '\\"' .. CODE_WORDS[r % #CODE_WORDS + 1] .. '\\"'
        elseif r % 17 == 0 then
            line[#line + 1] = '\\"C:\\\\temp\\\\' .. r % 1000 .. '\\"'
        end
        lines[#lines + 1] = concat(line, " ")
        size = size + #lines[#lines] + 2
    end
    return '{"model":"gpt-4o","temperature":0.2,"messages":['
        .. '{"role":"system","content":"You are a careful code reviewer."},'
        .. '{"role":"user","content":"Review this module:\\n```lua\\n'
        .. concat(lines, "\\n") .. '\\n```"}]}'
end

-- `text` with every character beyond ASCII written as a `\uXXXX` escape
-- (a surrogate pair beyond the BMP), as Python's json.dumps writes JSON by
-- default (ensure_ascii), and so as many clients send it.
function _M.ascii_escaped(text)
    return (text:gsub("[\xc0-\xf7][\x80-\xbf]*", function(c)
        local b1, b2, b3, b4 = byte(c, 1, 4)
        local code
        if b1 < 0xe0 then
            code = band(b1, 0x1f) * 64 + band(b2, 0x3f)
        elseif b1 < 0xf0 then
            code = band(b1, 0x0f) * 4096 + band(b2, 0x3f) * 64 + band(b3, 0x3f)
        else
            code = band(b1, 0x07) * 262144 + band(b2, 0x3f) * 4096 + band(b3, 0x3f) * 64
                   + band(b4, 0x3f)
            code = code - 0x10000
            return format("\\u%04x\\u%04x", 0xd800 + rshift(code, 10), 0xdc00 + band(code, 0x3ff))
        end
        return format("\\u%04x", code)
    end))
end

local WORDS = {
    "the", "request", "fails", "when", "cache", "is", "cold", "and", "retries", "after",
    "timeout", "see", "logs", "below", "`ngx.ctx`", "upstream", "returns", "502", "for",
    "large", "bodies", "d\\u00e9j\\u00e0", "caf\\u00e9", "\\u2713", "worker", "crash",
}
local LABELS = {
    { "bug", "d73a4a", "Something isn't working" },
    { "enhancement", "a2eeef", "New feature or request" },
    { "question", "d876e3", "Further information is requested" },
    { "good first issue", "7057ff", "Good for newcomers" },
}

-- `n` words picked by the generator state `x`; returns the text and the
-- new state. Newlines, quotes and a code fence make it markdown-like.
local function words(n, x)
    local out = {}
    for i = 1, n do
        x = xorshift(x)
        out[i] = WORDS[band(x, 0x7fffffff) % #WORDS + 1]
        if i % 12 == 0 then
            out[i] = out[i] .. "\\n\\n"
        end
    end
    return concat(out, " "), x
end

local function github_user(login, id)
    return format('{"login":"%s","id":%d,"node_id":"MDQ6VXNlcj%d",'
        .. '"avatar_url":"https://avatars.githubusercontent.com/u/%d?v=4","gravatar_id":"",'
        .. '"url":"https://api.github.com/users/%s","html_url":"https://github.com/%s",'
        .. '"followers_url":"https://api.github.com/users/%s/followers",'
        .. '"repos_url":"https://api.github.com/users/%s/repos","type":"User","site_admin":false}',
        login, id, id, id, login, login, login, login)
end

-- An array of issue objects shaped like GitHub's REST API (nested users,
-- label arrays, URLs, timestamps, markdown bodies) of about `bytes` bytes.
function _M.github(bytes)
    local issues, size, x = {}, 2, 2463534242
    local repo = "https://api.github.com/repos/octo-org/gateway"
    while size < bytes do
        local number = 1347 + #issues
        x = xorshift(x)
        local login = "user" .. band(x, 0xffff)
        local labels = {}
        for k = 1, band(rshift(x, 16), 3) do
            local l = LABELS[k]
            labels[k] = format('{"id":%d,"node_id":"MDU6TGFiZWw%d","url":"%s/labels/%s",'
                .. '"name":"%s","color":"%s","default":%s,"description":"%s"}',
                208045946 + k, k, repo, l[1], l[1], l[2], k == 1 and "true" or "false", l[3])
        end
        local title, body
        title, x = words(6, x)
        body, x = words(60, x)
        local closed = band(x, 1) == 1
        issues[#issues + 1] = format('{"url":"%s/issues/%d","repository_url":"%s",'
            .. '"labels_url":"%s/issues/%d/labels{/name}","comments_url":"%s/issues/%d/comments",'
            .. '"html_url":"https://github.com/octo-org/gateway/issues/%d","id":%d,'
            .. '"node_id":"MDU6SXNzdWUx%d","number":%d,"title":"%s","user":%s,"labels":[%s],'
            .. '"state":"%s","locked":false,"assignee":null,"assignees":[],"milestone":null,'
            .. '"comments":%d,"created_at":"2026-0%d-1%dT13:33:48Z",'
            .. '"updated_at":"2026-10-2%dT08:12:01Z","closed_at":%s,'
            .. '"author_association":"CONTRIBUTOR","body":"%s",'
            .. '"reactions":{"total_count":%d,"+1":%d,"-1":0,"laugh":0,"heart":1}}',
            repo, number, repo, repo, number, repo, number, number, 1e9 + number, number, number,
            title, github_user(login, band(x, 0xfffff)), concat(labels, ","),
            closed and "closed" or "open", band(x, 15), band(x, 7) + 1, band(x, 9),
            band(x, 9), closed and '"2026-10-30T10:00:00Z"' or "null", body,
            band(x, 31), band(x, 15))
        size = size + #issues[#issues] + 1
    end
    return "[" .. concat(issues, ",") .. "]"
end

-- The JSON of each event of a streamed chat completion: `n` chunks of
-- about 300 bytes (a role delta first, a finish reason and usage last).
function _M.sse_events(n)
    local events, x = {}, 88172645
    local head = '{"id":"chatcmpl-AbC123xYz","object":"chat.completion.chunk",'
        .. '"created":1763700000,"model":"gpt-4o-2024-08-06",'
        .. '"system_fingerprint":"fp_3a9f2b1c0d","choices":[{"index":0,"delta":'
    for i = 1, n do
        local delta
        local finish, usage = "null", ""
        if i == 1 then
            delta = '{"role":"assistant","content":""}'
        elseif i == n then
            delta, finish = "{}", '"stop"'
            usage = ',"usage":{"prompt_tokens":1187,"completion_tokens":'
                .. (n - 2) .. ',"total_tokens":' .. (1185 + n) .. "}"
        else
            local text
            text, x = words(8, x)
            delta = format('{"content":" %s"}', text)
        end
        events[i] = head .. delta .. ',"logprobs":null,"finish_reason":' .. finish
            .. "}]" .. usage .. "}"
    end
    return events
end

-- The SSE rows' nested change (benches/lua_bench.lua, shapes.sse) of the
-- event text `event`, made by cjson and by qjson (the modules): where each
-- puts the new value in its output and whether OpenResty's LuaJIT hashes
-- that byte, as "cjson writes the new value at byte B of N (...); qjson
-- ...". Its string hash reads a string of 128 bytes or more only in its
-- first and last 8 bytes and in windows of its first nine sixteenths, so
-- outputs that differ only past those share one hash chain
-- (docs/reliability.md, "Strings LuaJIT interns"); what varies from one
-- output to the next is the counter after "redacted ".
function _M.nested_change_where(event, cjson, qjson)
    local function where(name, lib)
        local t = lib.decode(event)
        t.choices[1].delta.content = "redacted 1"
        local out = lib.encode(t)
        local at = out:find("redacted 1", 1, true)
        local len = #out
        local counter = at + #"redacted "
        local read = counter > len - 8 and "in the last 8 bytes, read"
                     or counter > len * 9 / 16 and "past 9/16, unread"
                     or "before 9/16, read if a window covers it"
        return format("%s writes the new value at byte %d of %d (%s)", name, at, len, read)
    end
    return where("cjson", cjson) .. "; " .. where("qjson", qjson)
end

-- The access-pattern body: `n` short messages and an object of `n` keys,
-- `{"messages":[{"role":"user","content":[{"type":"text","text":"m1"}]},...],
--   "index":{"k1":1,...}}`, the shapes of issue 12's table.
function _M.access(n)
    local messages, index = {}, {}
    for i = 1, n do
        messages[i] = format('{"role":"user","content":[{"type":"text","text":"m%d"}]}', i)
        index[i] = format('"k%d":%d', i, i)
    end
    return '{"messages":[' .. concat(messages, ",") .. '],"index":{'
        .. concat(index, ",") .. "}}"
end

-- A tool call's arguments, as a model sends them: 64 bytes.
_M.TOOL_CALL = '{"order_id":"A-20931","options":{"history":true,"max_items":25}}'

-- A chat request whose one message is `phrase` `n` times.
local function escaped_request(phrase, n)
    return '{"model":"gpt-4o","messages":[{"role":"user","content":"'
           .. rep(phrase, n) .. '"}]}'
end

-- Chat requests of about 10 KB whose message is text as Python's
-- `json.dumps` sends it, every character from U+0080 a `\uXXXX` escape:
-- a label, a file name and the text.
_M.escaped = {
    { label = "French, an escape a word", name = "escaped-french",
      text = escaped_request("caf\\u00e9 cr\\u00e8me ", 500) },
    { label = "Chinese, ASCII commas between words", name = "escaped-chinese-commas",
      text = escaped_request("\\u4f60\\u597d\\u4e16\\u754c, ", 400) },
    { label = "Chinese throughout", name = "escaped-chinese",
      text = escaped_request("\\u4f60\\u597d\\u4e16\\u754c\\uff0c", 330) },
    { label = "emoji in English", name = "escaped-emoji",
      text = escaped_request("nice work \\ud83d\\ude00 ", 450) },
    { label = "Russian, every letter escaped", name = "escaped-russian",
      text = escaped_request("\\u043f\\u0440\\u0438\\u0432\\u0435\\u0442 \\u043c\\u0438\\u0440, ", 180) },
    { label = "English, a line feed every 72 bytes", name = "escaped-line-feeds",
      text = escaped_request(rep("the quick brown fox ", 3) .. "jumps over it\\n", 140) },
}

-- The sizes of the chat ladder, in bytes, with their labels.
_M.ladder = {
    { "2 KB", 2048 }, { "60 KB", 60e3 }, { "100 KB", 100e3 }, { "200 KB", 200e3 },
    { "500 KB", 500e3 }, { "1 MB", 1e6 }, { "2 MB", 2e6 }, { "5 MB", 5e6 }, { "10 MB", 10e6 },
}

-- Run as a script: write the ladder, github-100k, chat-code-100KB and the
-- escaped messages (an SSE stream is many texts, not one) to the
-- directory named by the first argument, printing each file's path.
if arg and arg[0] and arg[0]:match("payloads%.lua$") and arg[1] then
    local function write(name, text)
        local path = arg[1] .. "/" .. name .. ".json"
        local f = assert(io.open(path, "wb"))
        f:write(text)
        f:close()
        print(path)
    end
    for _, rung in ipairs(_M.ladder) do
        write("chat-" .. rung[1]:gsub(" ", ""), _M.chat(rung[2]))
    end
    write("github-100k", _M.github(100e3))
    write("chat-code-100KB", _M.chat_code(100e3))
    for _, message in ipairs(_M.escaped) do
        write(message.name, message.text)
    end
    return
end

return _M

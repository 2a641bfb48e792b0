local sse = require("qjson.sse")

-- A chat completion streamed the way OpenAI does it: a role chunk, content
-- chunks (with multi-byte UTF-8 so splits land inside sequences), a finish
-- chunk, a usage chunk, [DONE]; a keep-alive comment in the middle.
local PIECES = {
    "Hello", ",", " world", "!", " Привет", " мир", " — ", "日本語", "のテキスト",
    " 😀", " \"quoted\"", " back\\slash", " tab\t", " line\nbreak", " 42", " done",
}
local HEAD = '{"id":"chatcmpl-9xYz","object":"chat.completion.chunk","created":1718000000,'
             .. '"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_3aa7262c27","choices":'

local function escape(s)
    return (s:gsub('[%c"\\]', function(c)
        local named = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t" }
        return named[c] or string.format("\\u%04x", c:byte())
    end))
end

-- The data of each event, in order, and the text the content adds up to.
local function chat_events()
    local datas = {}
    datas[1] = HEAD .. '[{"index":0,"delta":{"role":"assistant","content":""},'
               .. '"logprobs":null,"finish_reason":null}]}'
    for _, piece in ipairs(PIECES) do
        datas[#datas + 1] = HEAD .. '[{"index":0,"delta":{"content":"' .. escape(piece)
                            .. '"},"logprobs":null,"finish_reason":null}]}'
    end
    datas[#datas + 1] = HEAD .. '[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}'
    datas[#datas + 1] = HEAD .. '[],"usage":{"prompt_tokens":12,"completion_tokens":'
                        .. #PIECES .. ',"total_tokens":' .. (12 + #PIECES) .. '}}'
    datas[#datas + 1] = "[DONE]"
    return datas, table.concat(PIECES)
end

local DATAS, TEXT = chat_events()

-- An Anthropic-style stream: every event typed, some with ids, one whose
-- JSON spans three data lines, a keep-alive comment between events.
local TYPED = {
    { event = "message_start", id = "1", data = '{"type":"message_start","message":'
      .. '{"id":"msg_01","role":"assistant","usage":{"input_tokens":25,"output_tokens":1}}}' },
    { event = "content_block_start",
      data = '{"type":"content_block_start","index":0,"content_block":{"type":"text"}}' },
    { event = "ping", data = '{"type": "ping"}', comment = "keep-alive" },
    { event = "content_block_delta", id = "2",
      data = '{"type":"content_block_delta",\n"delta":{"type":"text_delta",\n"text":"Hé 😀"}}' },
    { event = "message_delta", data = '{"type":"message_delta","usage":{"output_tokens":15}}' },
    { event = "message_stop", id = "3", data = '{"type":"message_stop"}' },
}

local CHAT = {}
for i, data in ipairs(DATAS) do
    CHAT[i] = { data = data, comment = i == 8 and "keep-alive" or nil }
end

-- The stream text of `events` with `eol` ending each line.
local function render(events, eol)
    local out = {}
    for _, ev in ipairs(events) do
        if ev.comment then
            out[#out + 1] = ": " .. ev.comment .. eol .. eol
        end
        if ev.event then
            out[#out + 1] = "event: " .. ev.event .. eol
        end
        if ev.id then
            out[#out + 1] = "id: " .. ev.id .. eol
        end
        for line in (ev.data .. "\n"):gmatch("(.-)\n") do
            out[#out + 1] = "data: " .. line .. eol
        end
        out[#out + 1] = eol
    end
    return table.concat(out)
end

local function chat_stream(eol)
    return render(CHAT, eol)
end

-- One comparable line per event.
local function signature(events)
    local out = {}
    for i, ev in ipairs(events) do
        out[i] = table.concat({ tostring(ev.event), tostring(ev.id), tostring(ev.data),
                                tostring(ev.done), tostring(ev.err),
                                tostring(ev.unterminated) }, "|")
    end
    return out
end

local function append(list, more)
    for _, v in ipairs(more) do
        list[#list + 1] = v
    end
    return list
end

-- The events of `chunks` fed in order, then finish().
local function run(chunks, opts)
    local stream = sse.new(opts)
    local events = {}
    for _, chunk in ipairs(chunks) do
        append(events, stream:feed(chunk))
    end
    return append(events, stream:finish())
end

-- What the reader must return for `events`: ids persist until replaced.
local function expected_signature(events)
    local want, id = {}, nil
    for i, ev in ipairs(events) do
        id = ev.id or id
        want[i] = { event = ev.event or "message", id = id, data = ev.data,
                    done = ev.data == "[DONE]" }
    end
    return signature(want)
end

local function bytes(s)
    local out = {}
    for i = 1, #s do
        out[i] = s:sub(i, i)
    end
    return out
end

-- Deterministic random chunk sizes (1..max_len).
local function random_chunks(s, seed, max_len)
    local chunks, pos = {}, 1
    while pos <= #s do
        seed = (seed * 1103515245 + 12345) % 2147483648
        local len = seed % max_len + 1
        chunks[#chunks + 1] = s:sub(pos, pos + len - 1)
        pos = pos + len
    end
    return chunks
end

describe("qjson.sse", function()
    local LF = chat_stream("\n")

    it("reads a chat completion stream in one chunk", function()
        local events = run({ LF })
        assert.same(expected_signature(CHAT), signature(events))
        local text = {}
        for _, ev in ipairs(events) do
            if not ev.done then
                local chunk = assert(ev:json())
                local choice = chunk.choices[1]
                if choice and choice.delta.content then
                    text[#text + 1] = choice.delta.content
                end
            end
        end
        assert.equal(TEXT, table.concat(text))
        local usage = events[#events - 1]
        local doc = assert(usage:parse())
        assert.equal(12 + #PIECES, tonumber(doc:get_i64("usage.total_tokens")))
        assert.equal(12 + #PIECES, usage:json().usage.total_tokens)
        assert.same({ nil, "qjson.sse: [DONE] is not JSON" }, { events[#events]:json() })
    end)

    it("reads typed events with ids and multi-line data", function()
        local events = run({ render(TYPED, "\n") })
        assert.same(expected_signature(TYPED), signature(events))
        assert.equal("Hé 😀", events[4]:json().delta.text)
        assert.equal(15, events[5]:parse():get_f64("usage.output_tokens"))
    end)

    for name, events in pairs({ chat = CHAT, typed = TYPED }) do
        for eol_name, eol in pairs({ LF = "\n", CRLF = "\r\n", CR = "\r" }) do
            local s = render(events, eol)
            local want = expected_signature(events)

            it(name .. " stream, " .. eol_name .. ": the same events split at every offset",
               function()
                for i = 0, #s do
                    assert.same(want, signature(run({ s:sub(1, i), s:sub(i + 1) })),
                                "split at byte " .. i)
                end
            end)

            it(name .. " stream, " .. eol_name .. ": the same events in 1-byte and random chunks",
               function()
                assert.same(want, signature(run(bytes(s))))
                for seed = 1, 100 do
                    assert.same(want, signature(run(random_chunks(s, seed, 40))),
                                "seed " .. seed)
                end
            end)
        end
    end

    it("reports invalid JSON for that event and goes on", function()
        local s = 'data: {"a":1}\n\ndata: {"a":\n\ndata: {"a":3}\n\ndata: \255\n\n'
        local events = run(bytes(s))
        assert.equal(4, #events)
        assert.equal(1, events[1]:json().a)
        local v, err = events[2]:json()
        assert.is_nil(v)
        assert.matches("^qjson: .* at byte %d+", err)
        local doc, perr = events[2]:parse()
        assert.is_nil(doc)
        assert.equal(err, perr)
        assert.equal(3, events[3]:json().a)
        assert.matches("^qjson: invalid UTF%-8", select(2, events[4]:json()))
    end)

    it("caches each event's JSON", function()
        local ev = run({ 'data: {"a":{"b":1}}\n\n' })[1]
        assert.equal(ev:json(), ev:json())
        assert.equal(ev:json().a, ev:json().a)
        assert.equal(ev:parse(), ev:parse())
    end)

    -- A one-line event's ev:parse() reads its line where it came in, with
    -- no string of its own (lua/qjson/sse.lua, Event): the documents and
    -- the errors, byte offsets included, are those of its data.
    it("parses an event's data where it is, as safe.parse(ev.data) would", function()
        local safe = require("qjson.safe")
        local s = 'data: {"a":[1,2,{"b":"x\\u00e9"}]}\n\ndata:{"a":1,}\n\n'
                  .. 'data:  {"a": "\xff"}\n\ndata: 7\n\ndata: [DONE]\n\n'
                  .. 'data: {"a":\ndata: 2}\n\n'
        for _, chunks in ipairs({ { s }, bytes(s), random_chunks(s, 11, 13) }) do
            local events = run(chunks)
            assert.equal(6, #events)
            for i, ev in ipairs(events) do
                local doc, err = ev:parse()
                -- No string of the data was made, but for the two-line event.
                assert.equal(i == 6, rawget(ev, "data") ~= nil)
                if ev.done then
                    assert.equal(5, i)
                    assert.same({ nil, "qjson.sse: [DONE] is not JSON" }, { doc, err })
                else
                    local want, want_err = safe.parse(ev.data)
                    assert.equal(want_err, err)
                    assert.equal(want and want:raw(), doc and doc:raw())
                end
            end
            assert.equal("x\xc3\xa9", events[1]:parse():get_str("a[2].b"))
            assert.matches("at byte 7,", select(2, events[2]:parse()))
            assert.equal(7, events[4]:parse():get_f64(""))
            assert.equal(2, events[6]:parse():get_f64("a"))
            assert.equal(' {"a": "\xff"}', events[3].data)
        end
    end)

    it("keeps the chunk an event's document reads alive as long as the document", function()
        local stream = sse.new()
        -- A chunk made here, referenced by nothing but the stream's events.
        local events = stream:feed(table.concat({ "data: ", '{"n":', "12345", "}\n\n" }))
        local doc = events[1]:parse()
        events = nil -- luacheck: ignore 311
        for _ = 1, 3 do
            collectgarbage()
            -- Strings made in between would reuse freed memory.
            for i = 1, 100 do local _ = string.rep("z", 20 + i) .. i end
        end
        assert.equal(12345, doc:get_f64("n"))
        assert.equal('{"n":12345}', doc:raw())
    end)

    it("reports an oversize event as soon as it passes the limit, then goes on", function()
        local big = string.rep("x", 100)
        local s = 'data: {"n":1}\n\ndata: "' .. big .. '"\ndata: more\n\ndata: {"n":2}\n\n'
        for _, chunks in ipairs({ { s }, bytes(s), random_chunks(s, 7, 9) }) do
            local events = run(chunks, { max_event_size = 64 })
            assert.equal(3, #events)
            assert.equal(1, events[1]:json().n)
            assert.is_nil(events[2].data)
            assert.is_nil(events[2].event)
            assert.is_nil(events[2].id)
            assert.equal("qjson.sse: event larger than max_event_size (64 bytes)", events[2].err)
            assert.same({ nil, events[2].err }, { events[2]:json() })
            assert.same({ nil, events[2].err }, { events[2]:parse() })
            assert.equal(2, events[3]:json().n)
        end
        -- Reported before the event ends, and nothing of it is kept.
        local stream = sse.new({ max_event_size = 64 })
        stream:feed("data: ")
        local events = stream:feed(big)
        assert.equal(1, #events)
        assert.truthy(events[1].err)
        assert.same({}, stream:feed(big))
        assert.is_false(stream.line)
        assert.equal(0, #stream:finish())
    end)

    it("counts every line of an event, comments and long lines too", function()
        local s = ": " .. string.rep("c", 70) .. "\ndata: 1\n\ndata: 2\n\n"
        local events = run({ s }, { max_event_size = 64 })
        assert.equal(2, #events)
        assert.truthy(events[1].err)
        assert.equal("2", events[2].data)
        assert.equal(1, #run({ "data: " .. string.rep("y", 58) .. "\n\n" },
                             { max_event_size = 64 }))
    end)

    it("follows the WHATWG field rules", function()
        local s = table.concat({
            "\239\187\191: comment",
            "event: add",
            "id: 7",
            "data:first",
            "data:  two spaces",
            "data",
            "retry: 1000",
            "unknown: x",
            "",
            "event: only-type-no-data",
            "",
            "id: bad\0id",
            "data: keeps id 7",
            "",
            "id",
            "data: empty id",
            "",
            "data:",
            "",
        }, "\n") .. "\n"
        local want = {
            "add|7|first\n two spaces\n|false|nil|nil",
            "message|7|keeps id 7|false|nil|nil",
            "message||empty id|false|nil|nil",
            "message|||false|nil|nil",
        }
        for _, eol in ipairs({ "\n", "\r\n", "\r" }) do
            local text = s:gsub("\n", eol)
            assert.same(want, signature(run({ text })))
            assert.same(want, signature(run(bytes(text))))
        end
    end)

    it("types an event whose event field is empty as message", function()
        for _, text in ipairs({ "event:\ndata: x\n\n", "event\ndata: x\n\n",
                                "event: a\nevent:\ndata: x\n\n" }) do
            assert.same({ "message|nil|x|false|nil|nil" }, signature(run({ text })))
            assert.same({ "message|nil|x|false|nil|nil" }, signature(run(bytes(text))))
        end
    end)

    it("drops a leading BOM before counting the first event, however it is split", function()
        local line = "data: " .. string.rep("y", 58)   -- 64 bytes
        local want = { "message|nil|" .. string.rep("y", 58) .. "|false|nil|nil" }
        local text = "\239\187\191" .. line .. "\n\n"
        for _, chunks in ipairs({ { text }, bytes(text), { "\239\187", text:sub(3) },
                                  { "", "\239", "", "\187\191", line .. "\n\n" } }) do
            assert.same(want, signature(run(chunks, { max_event_size = 64 })))
        end
        -- Only the first: a second BOM starts a line (an unknown field).
        assert.same({}, run({ "\239\187\191\239\187\191data: 1\n\n" }))
        -- A stream of a BOM alone has no line; bytes that start one and
        -- stop are a line, counted.
        assert.same({}, run({ "\239\187", "\191" }, { max_event_size = 1 }))
        local events = run({ "\239", "\187" }, { max_event_size = 1 })
        assert.equal(1, #events)
        assert.truthy(events[1].err)
        assert.same({ "message|nil|1|false|nil|nil" },
                    signature(run({ "\239", "\n", "data: 1\n\n" })))
    end)

    it("returns the event a stream ends in without its blank line", function()
        local stream = sse.new()
        assert.same({}, stream:feed('data: {"usage":{"total_tokens":5}}\ndata: [DO'))
        local events = stream:finish("NE]")
        assert.same({ 'message|nil|{"usage":{"total_tokens":5}}\n[DONE]|false|nil|true' },
                    signature(events))
        assert.same({ "message|nil|[DONE]|true|nil|true" },
                    signature(run({ "data: [DONE]\r\n" })))
        assert.same({ "message|nil|x|false|nil|nil" },
                    signature(run({ "data: x\n\n: trailing comment" })))
        assert.same({}, run({ ": only a comment" }))
    end)

    it("never raises on arbitrary bytes", function()
        local seed = 99
        for _ = 1, 200 do
            local chars = {}
            for i = 1, 200 do
                seed = (seed * 1103515245 + 12345) % 2147483648
                local pick = seed % 8
                chars[i] = pick < 4 and string.char(seed % 256)
                           or ({ "\n", "\r", ":", "data" })[pick - 3]
            end
            local s = table.concat(chars)
            local ok, events = pcall(run, random_chunks(s, seed, 17), { max_event_size = 64 })
            assert.is_true(ok, events)
            for _, ev in ipairs(events) do
                assert.is_true((pcall(ev.json, ev)))
                assert.is_true((pcall(ev.parse, ev)))
            end
        end
    end)

    it("raises on misuse", function()
        local stream = sse.new()
        assert.has_error(function() stream:feed(nil) end,
                         "bad argument #1 to 'feed' (string expected, got nil)")
        stream:finish()
        assert.has_error(function() stream:feed("") end, "qjson.sse: feed() after finish()")
        assert.has_error(function() sse.new({ max_event_size = 0 }) end,
                         "qjson.sse: max_event_size must be a positive integer")
        assert.has_error(function() sse.new({ max = 1 }) end, "qjson.sse: unknown option 'max'")
    end)

    it("takes time linear in the stream however it is chunked", function()
        -- One event of n bytes fed a byte at a time: re-scanning the
        -- buffered line on every chunk would make 4n cost 16 times n.
        require("helper").assert_linear(function(n)
            return bytes("data: " .. string.rep("a", n) .. "\n\n")
        end, function(chunks)
            local stream = sse.new()
            for _, c in ipairs(chunks) do
                stream:feed(c)
            end
        end, 20000)
    end)

    it("takes time linear in a chunk of lines ended by CR alone", function()
        -- Each line's LF was searched for to the chunk's end (here to the
        -- one LF at its end): n such lines cost n searches of the rest.
        require("helper").assert_linear(function(n)
            return ('data: {"x":1}\r\r'):rep(n) .. "\n"
        end, function(chunk)
            local stream = sse.new()
            assert(#stream:feed(chunk) == (#chunk - 1) / 15)
        end, 5000)
    end)

    it("takes time linear in a chunk of lines without a colon", function()
        -- Each line's field name was searched for to the chunk's end: n
        -- such lines in one chunk cost n searches of the rest of it.
        require("helper").assert_linear(function(n)
            return ("x\n\n"):rep(n)
        end, function(chunk)
            local stream = sse.new()
            assert(#stream:feed(chunk) == 0)
            stream:finish()
        end, 5000)
    end)
end)

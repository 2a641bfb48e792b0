-- Deterministic benchmark payloads (no downloads): the chat-completion
-- request ladder, and later the other shapes a gateway sees. Every builder
-- takes a target size and returns the JSON text; the same arguments always
-- give the same bytes.

local ffi = require("ffi")
local bit = require("bit")

local band, bxor, lshift, rshift = bit.band, bit.bxor, bit.lshift, bit.rshift
local concat, format = table.concat, string.format

local _M = {}

local B64 = ffi.new("const char[64]",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

-- `n` base64 characters from a xorshift32 generator seeded with `seed`.
function _M.base64(n, seed)
    local buf = ffi.new("char[?]", n)
    local x = seed
    for i = 0, n - 1 do
        x = bxor(x, lshift(x, 13))
        x = bxor(x, rshift(x, 17))
        x = bxor(x, lshift(x, 5))
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

-- The sizes of the chat ladder, in bytes, with their labels.
_M.ladder = {
    { "2 KB", 2048 }, { "60 KB", 60e3 }, { "100 KB", 100e3 }, { "200 KB", 200e3 },
    { "500 KB", 500e3 }, { "1 MB", 1e6 }, { "2 MB", 2e6 }, { "5 MB", 5e6 }, { "10 MB", 10e6 },
}

return _M

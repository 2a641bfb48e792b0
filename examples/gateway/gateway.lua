-- An LLM-gateway request filter for nginx's access phase: reads the chat
-- request body, enforces a model allow-list and a max_tokens cap, routes
-- models to other names, and forwards the body (changed or not) with
-- proxy_pass. See examples/gateway/gateway.conf for the nginx side.
--
--   init_by_lua_block {
--       require("gateway").configure({
--           models = { "gpt-4o", "gpt-4o-mini" },          -- allow-list
--           routes = { ["gpt-4o"] = "gpt-4o-2024-08-06" },  -- rewrite model
--           max_tokens = 4096,                              -- cap
--       })
--   }
--   access_by_lua_block { require("gateway").access() }
--
-- Policy, in order:
--   * no body, or a body that is not valid JSON: 400, the body says why
--     (qjson's message: "qjson: ... at byte N"); nothing is forwarded.
--   * a key repeated in any object: 400. Parsers disagree on which copy
--     wins (qjson and cjson take the last, others the first), so a gateway
--     that checked one copy could forward a request the upstream reads
--     differently. Keys are compared after unescaping, so "mod\u0065l"
--     is "model" for the allow-list and for the duplicate check.
--   * root not an object, or "model" not a string: 400.
--   * model not on the allow-list: 403.
--   * max_tokens not a positive integer: 400; above the cap: clamped to the
--     cap (the request still succeeds, as with the upstream's own limit);
--     absent: left absent.
--   * model in the routing table: replaced by its route.
-- Only a changed request is re-encoded. qjson re-encodes it as the original
-- bytes with just the changed values spliced in, and ngx.req.set_body_data
-- sets the new Content-Length.
--
-- access("cjson") runs the same policy with lua-cjson, for comparison
-- (tools/gateway_bench.sh); cjson cannot detect repeated keys.

local qjson_safe = require("qjson.safe")
local cjson_safe = require("cjson.safe")

local ngx = ngx
local io_open = io.open
local type = type
local pairs = pairs
local ipairs = ipairs

local CODECS = {
    qjson = {
        decode = function(text)
            return qjson_safe.decode(text, { duplicate_keys = "error" })
        end,
        encode = qjson_safe.encode,
    },
    cjson = { decode = cjson_safe.decode, encode = cjson_safe.encode },
}

local conf = { models = {}, routes = {}, max_tokens = math.huge }

local _M = {}

-- Sets the policy (see the header). Call from init_by_lua.
function _M.configure(opts)
    local models = {}
    for _, name in ipairs(opts.models or {}) do
        models[name] = true
    end
    local routes = {}
    for from, to in pairs(opts.routes or {}) do
        routes[from] = to
    end
    conf = { models = models, routes = routes, max_tokens = opts.max_tokens or math.huge }
end

-- The request body as a string, wherever nginx keeps it: in memory, or in
-- a temp file when it is larger than client_body_buffer_size. nil when the
-- request has no body.
function _M.read_body()
    ngx.req.read_body()
    local data = ngx.req.get_body_data()
    if data then
        return data
    end
    local path = ngx.req.get_body_file()
    if not path then
        return nil
    end
    local f, err = io_open(path, "rb")
    if not f then
        return nil, err
    end
    data = f:read("*a")
    f:close()
    return data
end

local function reject(json, status, message)
    ngx.status = status
    ngx.header.content_type = "application/json"
    ngx.say(json.encode({ error = { message = message } }))
    return ngx.exit(status)
end

local function positive_integer(v)
    return type(v) == "number" and v >= 1 and v % 1 == 0 and v < math.huge
end

-- The access-phase handler: rejects the request (ends it with 400/403)
-- or lets it through with the body the upstream must see.
function _M.access(codec)
    local json = CODECS[codec or "qjson"]
    local body, err = _M.read_body()
    if not body or body == "" then
        return reject(json, 400, err or "request body is empty")
    end
    local req
    req, err = json.decode(body)
    if req == nil then
        return reject(json, 400, err)
    end
    if type(req) ~= "table" then
        return reject(json, 400, "request body must be a JSON object")
    end
    local model = req.model
    if type(model) ~= "string" then
        return reject(json, 400, "model must be a string")
    end
    if not conf.models[model] then
        return reject(json, 403, "model not allowed: " .. model)
    end

    local changed = false
    local max_tokens = req.max_tokens
    if max_tokens ~= nil then
        if not positive_integer(max_tokens) then
            return reject(json, 400, "max_tokens must be a positive integer")
        end
        if max_tokens > conf.max_tokens then
            req.max_tokens = conf.max_tokens
            changed = true
        end
    end
    local route = conf.routes[model]
    if route then
        req.model = route
        changed = true
    end
    if changed then
        local out
        out, err = json.encode(req)
        if not out then
            return reject(json, 500, err)
        end
        ngx.req.set_body_data(out)
    end
end

return _M

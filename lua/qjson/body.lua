-- The request body where nginx keeps it, for qjson.decode_body and
-- qjson.parse_body: no Lua string of it.
--
-- ngx.req.get_body_data() copies the body into a new Lua string, and
-- LuaJIT maps fresh memory for every string of 128 KB or more: for a 1 MB
-- body, 257 page faults, and twice that when nginx read it in two buffers
-- (the function joins them in a userdata first). That costs more than the
-- JSON work in a gateway's handler: in `make bench-gateway` (1 MB
-- requests), the example gateway decoding bodies from that string served
-- 647 requests a second with 562 faults a request, and reading them as
-- below 1 044 with none, where plain proxy_pass served 1 067
-- (docs/benchmarks.md, "The request body where nginx keeps it"). The
-- pointer is that of `$request_body`, as lua-resty-core's ngx.var reads
-- it (ngx_http_lua_ffi_var_get): the body's own buffer when nginx holds
-- it in one (`client_body_in_single_buffer on`), else a copy nginx makes
-- in the request's pool (heap memory earlier requests freed). The
-- document copies the bytes into memory of its own (qjson_parse_copy), as
-- it outlives the request's.
--
-- Unless nginx caches the variable: where the configuration names
-- `$request_body` (a log_format, a map, proxy_set_body), nginx keeps its
-- value from the first time it is asked for in a request, and it would
-- give a body since replaced (ngx.req.set_body_data, set_body_file,
-- init_body) or "no body" when first asked before ngx.req.read_body().
-- There the body comes from get_body_data() and get_body_file(), as
-- cjson's callers read it: the same value, at the string's cost. Whether
-- nginx caches it is found once per worker (`variable_cached`).

local ffi = require("ffi")

local C = ffi.C
local error = error
local pcall = pcall
local tonumber = tonumber
local type = type
local rawget = rawget
local ffi_string = ffi.string
local io_open = io.open

local _M = {}

local NAME = "request_body"
-- LuaJIT's longest string (LJ_MAX_STR).
local MAX_STRING_BYTES = 2 ^ 31 - 256
local NGX_OK, NGX_ERROR = 0, -1

-- Set on the first call, in nginx: lua-resty-core's request getter, the
-- out-cells of ngx_http_lua_ffi_var_get (declared by resty.core.var) and
-- the room for the name in lower case that it asks for.
local ngx, get_request, value, value_len, lower_name, errmsg

-- Whether nginx caches $request_body in this configuration: nil until
-- found (see `variable_cached`), then true or false for the worker's life
-- (a new configuration comes with new workers).
local cached = nil

-- Raises at the level `read` does, one frame further up.
local function init()
    ngx = rawget(_G, "ngx")
    if type(ngx) ~= "table" or not ngx.req then
        error("qjson: decode_body and parse_body run in nginx (lua-nginx-module)", 4)
    end
    local found, base = pcall(require, "resty.core.base")
    if not found or not pcall(require, "resty.core.var") then
        error("qjson: decode_body and parse_body need lua-resty-core", 4)
    end
    get_request = base.get_request
    value = ffi.new("unsigned char *[1]")
    value_len = ffi.new("size_t[1]")
    lower_name = ffi.new("char[?]", #NAME)
    errmsg = base.get_errmsg_ptr()
end

-- Whether nginx caches $request_body for request r, whose body has been
-- read (asking before would have nginx cache "no body" for it): nginx's
-- own lookup, asked twice, gives the same value cell when it caches the
-- variable (the request's) and a new one each time when it does not (one
-- from the request's pool). Asking makes nginx cache the body as it is
-- now, which a body replaced later in the request (set_body_data) would
-- not change: `proxy_set_body $request_body` forwarded, and log_format
-- logged, the body as read, not as replaced. So the cell is marked not
-- yet evaluated again (nginx's `valid` and `not_found` bits; its
-- ngx_variable_value_t, declared here as `qjson_ngx_variable_value_t`),
-- as it was unless the configuration had asked for the variable earlier
-- in this request; then nginx evaluates it anew when next asked. True,
-- the safe answer, when nginx's lookup cannot be called as declared
-- here.
local function variable_cached(r)
    pcall(ffi.cdef, [[
        void *ngx_http_get_variable(ngx_http_request_t *r, ngx_str_t *name, uintptr_t key);
        typedef struct {
            unsigned len:28;
            unsigned valid:1;
            unsigned no_cacheable:1;
            unsigned not_found:1;
            unsigned escape:1;
            unsigned char *data;
        } qjson_ngx_variable_value_t;
    ]])
    local ok, same = pcall(function()
        local name = ffi.new("ngx_str_t")
        name.data, name.len = NAME, #NAME
        -- nginx's hash of the name (ngx_hash: key * 31 + byte).
        local key = 0ULL
        for i = 1, #NAME do
            key = key * 31 + NAME:byte(i)
        end
        local first = C.ngx_http_get_variable(r, name, key)
        if first == nil then
            return true
        elseif first ~= C.ngx_http_get_variable(r, name, key) then
            return false
        end
        local cell = ffi.cast("qjson_ngx_variable_value_t *", first)
        cell.valid, cell.not_found = 0, 0
        return true
    end)
    return not ok or same
end

-- The whole of the open file f, read by its size: f:read("*a") grows its
-- buffer by doubling and cannot reach 2^31 bytes, so a file of 1 GiB or
-- more failed where a Lua string holds almost 2 GiB. Or nil and why
-- (running out of memory included).
local function read_whole(f)
    local size, err = f:seek("end")
    if not size then
        return nil, err
    elseif size > MAX_STRING_BYTES then
        -- (A directory's end is at 2^63 - 1.)
        return nil, size .. " bytes, more than a Lua string holds"
    end
    f:seek("set")
    local read, text = pcall(f.read, f, size)
    if not read then
        return nil, size .. " bytes: " .. tostring(text)
    end
    if text == nil and size > 0 then
        -- Emptied since its size was taken.
        return nil, "it ended early"
    end
    -- (nil for a file of no bytes.)
    return text or ""
end

-- The text of the file nginx wrote the body to (a body larger than
-- client_body_buffer_size, or any under client_body_in_file_only); nil
-- for an empty one, a body of no bytes. Errors are qjson's, at the level
-- of the caller of `apply`'s caller.
local function read_file(path)
    local f, err = io_open(path, "rb")
    local text
    if f then
        text, err = read_whole(f)
        f:close()
    end
    if not text then
        error("qjson: cannot read the request body's file: " .. err, 4)
    end
    if text == "" then
        return nil
    end
    return text
end

-- The current request's body: the pointer to it and its length when nginx
-- holds it in memory; its text when nginx wrote it to a temporary file,
-- or caches $request_body; nil when the request has none, or it has not
-- been read (ngx.req.read_body(), or `lua_need_request_body on`). Raises
-- at the level of the caller of `apply`'s caller.
local function read()
    if not get_request then
        init()
    end
    local r = get_request()
    if not r then
        error("qjson: no request found", 3)
    end
    local text
    if cached == false then
        local rc = C.ngx_http_lua_ffi_var_get(r, NAME, #NAME, lower_name, 0, value, value_len,
                                              errmsg)
        if rc == NGX_OK then
            local len = tonumber(value_len[0])
            -- A body of no bytes (ngx.req.init_body, finish_body): none,
            -- as get_body_data() gives.
            if len == 0 then
                return nil
            end
            return value[0], len
        elseif rc == NGX_ERROR then
            error("qjson: " .. ffi_string(errmsg[0]), 3)
        end
        -- Not in memory (NGX_DECLINED): in a file, or no body.
    else
        text = ngx.req.get_body_data()
    end
    local path = not text and ngx.req.get_body_file()
    if cached == nil and (text or path) then
        cached = variable_cached(r)
    end
    if path then
        -- Not a tail call: read_file raises at a level counted from here.
        text = read_file(path)
    end
    return text
end

-- `f(body, opts)`, f a module's parse or decode, on the current request's
-- body: f(ptr, len, opts) on a body in memory, f(text, opts) on one read
-- from its file or, where nginx caches $request_body, got as a string;
-- nil when there is none. Called by a tail call, and
-- calling f by one, so that what raises raises at the caller's level.
function _M.apply(f, opts)
    local text, len = read()
    if text == nil then
        return nil
    elseif len then
        return f(text, len, opts)
    end
    return f(text, opts)
end

return _M

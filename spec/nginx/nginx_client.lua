-- A minimal HTTP/1.0 client over cosockets, for specs running inside
-- nginx that need a real request to their own server: subrequests skip the
-- log phase and never buffer a body to a temp file.

local ngx = ngx
local concat = table.concat
local lower = string.lower
local tonumber = tonumber
local pairs = pairs

local _M = {}

-- request(method, path [, body [, headers]]) → status, body, headers (keys
-- lower-cased). Raises on a network error.
function _M.request(method, path, body, headers)
    local sock = ngx.socket.tcp()
    sock:settimeout(60000)
    assert(sock:connect("127.0.0.1", tonumber(ngx.var.server_port)))
    local req = { method, " ", path, " HTTP/1.0\r\nHost: localhost\r\n" }
    if body then
        req[#req + 1] = "Content-Length: " .. #body .. "\r\n"
    end
    for name, value in pairs(headers or {}) do
        req[#req + 1] = name .. ": " .. value .. "\r\n"
    end
    req[#req + 1] = "\r\n"
    req[#req + 1] = body or ""
    assert(sock:send(concat(req)))

    local line = assert(sock:receive("*l"))
    local status = tonumber(line:match("^HTTP/%d%.%d (%d%d%d)"))
    local got = {}
    while true do
        line = assert(sock:receive("*l"))
        if line == "" then break end
        local name, value = line:match("^([^:]+):%s*(.*)$")
        got[lower(name)] = value
    end
    local data = assert(sock:receive("*a"))
    sock:close()
    return status, data, got
end

return _M

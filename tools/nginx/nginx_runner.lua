-- The nginx side of tools/nginx-lua: runs the requested file in the content
-- phase of /run, and lets it reach every other request phase through the
-- /phase/ location, whose handlers call hooks the file registers:
--
--   local runner = require("nginx_runner")
--   runner.on("log", function() ... end)   -- any phase below
--   local res = ngx.location.capture("/phase/x")
--
-- Phases: rewrite, access, content, header_filter, body_filter, log.
-- Subrequests (ngx.location.capture) run all but log; a real HTTP request
-- (a cosocket to 127.0.0.1:ngx.var.server_port) runs log too. Without a
-- content hook /phase/ answers "phase"; hooks stay until replaced or
-- runner.on(phase, nil).

local ngx = ngx
local io_stdout = io.stdout
local tostring = tostring
local select = select
local concat = table.concat
local setmetatable = setmetatable

local PHASES = {
    rewrite = true, access = true, content = true,
    header_filter = true, body_filter = true, log = true,
}

local hooks = {}

local _M = {}

function _M.on(phase, fn)
    if not PHASES[phase] then
        error("nginx_runner.on: unknown phase " .. tostring(phase), 2)
    end
    hooks[phase] = fn
end

function _M.phase(name)
    local hook = hooks[name]
    if hook then
        return hook()
    end
    if name == "content" then
        ngx.print("phase")
    end
end

-- Unique value raised by exit(); xpcall's handler tells it from errors.
local EXIT = {}

local function script_print(...)
    local n = select("#", ...)
    local parts = {}
    for i = 1, n do
        parts[i] = tostring((select(i, ...)))
    end
    io_stdout:write(concat(parts, "\t"), "\n")
    io_stdout:flush()
end

local function script_exit(code)
    error({ [EXIT] = tonumber(code) or 0 }, 0)
end

local function on_error(err)
    if type(err) == "table" and err[EXIT] then
        return err
    end
    return debug.traceback(tostring(err), 2)
end

-- The /run handler. The body is the file and its arguments, NUL-separated;
-- the answer is the exit status on the first line, then the error, if any
-- (the worker's stderr is nginx's error log, not the caller's).
function _M.run()
    ngx.req.read_body()
    local body = ngx.req.get_body_data() or ""
    local arg, n = {}, -1
    for item in body:gmatch("([^%z]*)%z") do
        n = n + 1
        arg[n] = item
    end

    local status, message
    local chunk, err = loadfile(arg[0])
    if not chunk then
        status, message = 1, err
    else
        setfenv(chunk, setmetatable({ arg = arg, exit = script_exit, print = script_print },
                                    { __index = _G }))
        local ok, res = xpcall(chunk, on_error, unpack(arg, 1, n))
        io_stdout:flush()
        if ok then
            status = 0
        elseif type(res) == "table" then
            status = res[EXIT]
        else
            status, message = 1, res
        end
    end
    ngx.say(status)
    if message then
        ngx.say(message)
    end
end

return _M

-- The specs that must also hold inside nginx, as TAP:
--
--   tools/nginx-lua spec/nginx/run.lua
--
-- The content phase (this file's own request) runs the parse, decode, safe,
-- differential and eager specs and spec/nginx/nginx_checks.lua; the rewrite,
-- access, header_filter, body_filter and log phases of one real request
-- each run the parse, decode and safe specs again. qjson is loaded once
-- per worker through lua_package_cpath, as in production, so every phase
-- shares the same library, null and options. Exits 1 if anything failed.

local runner = require("nginx_runner")

local here = arg[0]:match("^(.*/)") or "./"
local specs = here .. "../"
package.path = specs .. "?.lua;" .. here .. "?.lua;" .. package.path
local tap = require("nginx_tap")
local client = require("nginx_client")

local EVERY_PHASE = { "parse_spec", "decode_spec", "safe_spec" }
local OTHER_PHASES = { "rewrite", "access", "header_filter", "body_filter", "log" }

local function run_specs(phase, names)
    for _, name in ipairs(names) do
        tap.run_file(phase, specs .. name .. ".lua")
    end
end

run_specs("content", EVERY_PHASE)
run_specs("content", { "differential_spec", "eager_spec" })
tap.run_file("content", here .. "nginx_checks.lua")

for _, phase in ipairs(OTHER_PHASES) do
    runner.on(phase, function()
        -- body_filter runs once per chunk; the specs run on the first.
        if ngx.ctx.specs_ran then return end
        ngx.ctx.specs_ran = true
        run_specs(phase, EVERY_PHASE)
    end)
    local status = client.request("GET", "/phase/" .. phase)
    runner.on(phase, nil)
    assert(status == 200, phase .. " request failed: " .. tostring(status))
end

exit(tap.finish() == 0 and 0 or 1)

-- Seconds on the monotonic clock, for the benchmarks that time whole
-- loops (benches/access_loops.lua, benches/trailing.lua):
-- `local now = require("clock")` with benches/ on package.path.

local ffi = require("ffi")

ffi.cdef [[
    struct qjson_clock_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clock, struct qjson_clock_timespec *ts);
]]

local CLOCK_MONOTONIC = 1
local ts = ffi.new("struct qjson_clock_timespec")

return function()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

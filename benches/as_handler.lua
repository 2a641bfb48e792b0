-- `fn` called as nginx calls a handler: in a coroutine of its own, so
-- that no trace spans two calls (HANDLERS=1 for benches/lua_bench.lua and
-- benches/insn_loops.lua). Timed in a benchmark's loop, a workload is
-- compiled inline into that loop's trace, and a side trace that cannot
-- find its way back to the loop ("loop unroll limit reached") is given up
-- after a few tries, its exit then running interpreted for the rest of
-- the process; which exits get there changes from process to process, and
-- so do the tool call's change rows (docs/benchmarks.md, "Small
-- documents"). The coroutine's creation is in every library's time, as
-- nginx's is. Its one argument is passed on (a C function may check the
-- count: cjson.encode does); an error in `fn` is raised again.

local create, resume, error = coroutine.create, coroutine.resume, error

return function(fn)
    return function(s)
        local ok, out = resume(create(fn), s)
        if not ok then
            error(out, 0)
        end
        return out
    end
end

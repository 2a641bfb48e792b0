-- Runs busted-style spec files where busted itself cannot run: inside an
-- nginx request phase (busted's runner owns the process: it parses argv,
-- changes directory and calls os.exit). Supports what the specs use:
-- describe, it, pending, setup, teardown, before_each, after_each, finally
-- and luassert's assert. Writes TAP lines shaped like busted's TAP output
-- ("ok N - name", "not ok N - name" plus "# " diagnostics, "ok N - # SKIP
-- why"), numbered across every suite this worker runs, so a caller can run
-- suites in several phases and print one plan at the end.

local luassert = require("luassert")

local io_stdout = io.stdout
local concat = table.concat
local format = string.format
local gsub = string.gsub
local tostring = tostring
local type = type
local xpcall = xpcall
local traceback = debug.traceback
local setmetatable = setmetatable
local setfenv = setfenv

local _M = {}

local counter = 0
local failures = 0

local function emit(line)
    io_stdout:write(line, "\n")
    io_stdout:flush()
end

local function new_block(name, parent)
    return { name = name, parent = parent, children = {}, setup = {}, teardown = {},
             before_each = {}, after_each = {} }
end

local function full_name(block, name)
    local parts = { name }
    while block and block.name do
        table.insert(parts, 1, block.name)
        block = block.parent
    end
    return concat(parts, " ")
end

-- A pending() inside a running test raises this, so the rest of the test
-- is skipped like busted does.
local PENDING = {}

local function on_error(err)
    if type(err) == "table" and err[PENDING] then
        return err
    end
    if type(err) == "table" then
        err = err.message or tostring(err)
    end
    return traceback(tostring(err), 2)
end

local function report(label, name, ok, err)
    counter = counter + 1
    local title = label .. ": " .. name
    if ok then
        emit(format("ok %d - %s", counter, title))
    elseif type(err) == "table" then
        emit(format("ok %d - # SKIP %s", counter, err[PENDING]))
    else
        failures = failures + 1
        emit(format("not ok %d - %s", counter, title))
        emit("# " .. gsub(tostring(err), "\n", "\n# "))
    end
end

local function run_hooks(list, from_inner)
    local n = #list
    for i = 1, n do
        list[from_inner and n - i + 1 or i]()
    end
end

-- Every before_each from the outermost block in, or after_each from the
-- innermost block out.
local function chain(block, field)
    local blocks = {}
    while block do
        table.insert(blocks, 1, block)
        block = block.parent
    end
    local list = {}
    for _, b in ipairs(blocks) do
        for _, fn in ipairs(b[field]) do
            list[#list + 1] = fn
        end
    end
    return list
end

local function run_test(label, block, test)
    local cleanups = {}
    local ok, err = xpcall(function()
        run_hooks(chain(block, "before_each"))
        test.fn(function(fn) cleanups[#cleanups + 1] = fn end)
    end, on_error)
    for i = #cleanups, 1, -1 do
        local cok, cerr = xpcall(cleanups[i], on_error)
        if ok and not cok then ok, err = false, cerr end
    end
    local aok, aerr = xpcall(run_hooks, on_error, chain(block, "after_each"), true)
    if ok and not aok then ok, err = false, aerr end
    report(label, full_name(block, test.name), ok, err)
end

local function run_block(label, block)
    local ok, err = xpcall(run_hooks, on_error, block.setup)
    if not ok then
        report(label, full_name(block, "setup"), false, err)
        return
    end
    for _, child in ipairs(block.children) do
        if child.children then
            run_block(label, child)
        elseif child.pending then
            report(label, full_name(block, child.name), false, { [PENDING] = child.name })
        else
            run_test(label, block, child)
        end
    end
    ok, err = xpcall(run_hooks, on_error, block.teardown, true)
    if not ok then
        report(label, full_name(block, "teardown"), false, err)
    end
end

-- Loads the spec file at `path` and runs every test in it, each reported
-- as "LABEL: describe ... it". Returns the number of failures so far.
function _M.run_file(label, path)
    local root = new_block(nil, nil)
    local current = root
    local in_test_cleanup

    local env = setmetatable({ assert = luassert }, { __index = _G })
    function env.describe(name, fn)
        local block = new_block(name, current)
        current.children[#current.children + 1] = block
        current = block
        fn()
        current = block.parent
    end
    function env.it(name, fn)
        current.children[#current.children + 1] = {
            name = name,
            fn = function(add_cleanup)
                in_test_cleanup = add_cleanup
                fn()
            end,
        }
    end
    function env.pending(name)
        if in_test_cleanup then
            error({ [PENDING] = name }, 0)
        end
        current.children[#current.children + 1] = { name = name, pending = true }
    end
    function env.finally(fn) in_test_cleanup(fn) end
    for _, hook in ipairs({ "setup", "teardown", "before_each", "after_each" }) do
        env[hook] = function(fn)
            local list = current[hook]
            list[#list + 1] = fn
        end
    end

    local chunk, err = loadfile(path)
    local ok = chunk ~= nil
    if ok then
        setfenv(chunk, env)
        ok, err = xpcall(chunk, on_error)
    end
    if not ok then
        report(label, "load " .. path, false, err)
        return failures
    end
    run_block(label, root)
    return failures
end

-- The TAP plan for every test reported so far, and the failure count.
function _M.finish()
    emit("1.." .. counter)
    return failures
end

return _M

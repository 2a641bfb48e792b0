-- JSONTestSuite: every y_ file parses, every n_ file is rejected, and every
-- i_ file gets the verdict documented in docs/conformance.md.

local qjson = require("qjson")
local safe = require("qjson.safe")
local helper = require("helper")

local DIR = helper.data_dir() .. "/jsontestsuite/"

-- docs/conformance.md, found from this file's own path.
local function doc_path()
    local source = debug.getinfo(1, "S").source
    local spec_dir = source:match("^@(.*)/[^/]*$") or "spec"
    return spec_dir .. "/../docs/conformance.md"
end

-- The JSONTestSuite file names, by class ("y", "n", "i").
local function files_by_class()
    local classes = { y = {}, n = {}, i = {} }
    for _, name in ipairs(helper.list(DIR)) do
        local class = name:match("^([yni])_.*%.json$")
        if class then
            local list = classes[class]
            list[#list + 1] = name
        end
    end
    return classes
end

local function trim(s)
    return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- The i_ rows of the table in docs/conformance.md, in order: each has
-- file, verdict, reason and, for a rejection, the quoted qjson message.
local function documented_rows(text)
    local rows = {}
    for line in text:gmatch("[^\n]+") do
        if line:match("^| i_") then
            local cells = {}
            for cell in line:sub(2):gmatch("([^|]*)|") do
                cells[#cells + 1] = trim(cell)
            end
            rows[#rows + 1] = {
                line = line,
                ncells = #cells,
                file = cells[1],
                verdict = cells[2],
                reason = cells[3] or "",
                message = (cells[3] or ""):match("`(qjson: [^`]*)`"),
            }
        end
    end
    return rows
end

-- qjson's verdict on `text`: "accepted", or "rejected" and the message.
local function verdict(text, opts)
    local ok, err = pcall(qjson.parse, text, opts)
    if ok then
        return "accepted"
    end
    return "rejected", err
end

local FILES = files_by_class()
local DOC_TEXT = helper.read(doc_path())
local ROWS = documented_rows(DOC_TEXT)

-- The only y_ files with a repeated key.
local DUPLICATE_KEY_FILES = {
    "y_object_duplicated_key.json",
    "y_object_duplicated_key_and_value.json",
}
local HAS_DUPLICATE_KEY = {}
for _, name in ipairs(DUPLICATE_KEY_FILES) do
    HAS_DUPLICATE_KEY[name] = true
end

describe("JSONTestSuite", function()
    it("has the documented number of y_ and n_ files", function()
        local y, n = DOC_TEXT:match("All (%d+) `y_` files are accepted and all (%d+) `n_` files")
        assert.is_not_nil(y, "docs/conformance.md states no y_/n_ counts")
        assert.equal(tonumber(y), #FILES.y)
        assert.equal(tonumber(n), #FILES.n)
        assert.is_true(#FILES.i > 0)
    end)

    describe("y_ files are accepted", function()
        for _, name in ipairs(FILES.y) do
            it(name, function()
                local text = helper.read(DIR .. name)
                local ok, err = pcall(qjson.parse, text)
                assert.is_true(ok, err)
                local d, serr = safe.parse(text)
                assert.is_not_nil(d, serr)
            end)
        end
    end)

    describe("n_ files are rejected", function()
        for _, name in ipairs(FILES.n) do
            it(name, function()
                local text = helper.read(DIR .. name)
                local ok, err = pcall(qjson.parse, text)
                assert.is_false(ok)
                assert.equal("string", type(err))
                assert.equal("qjson: ", err:sub(1, 7))
                local d, serr = safe.parse(text)
                assert.is_nil(d)
                assert.equal("string", type(serr))
                assert.equal(err, serr)
            end)
        end
    end)

    describe("i_ files match docs/conformance.md", function()
        local by_file = {}
        for _, row in ipairs(ROWS) do
            by_file[row.file] = by_file[row.file] or {}
            table.insert(by_file[row.file], row)
        end

        it("has one well-formed row per i_ file and no other rows", function()
            local problems = {}
            local present = {}
            for _, name in ipairs(FILES.i) do
                present[name] = true
                local count = by_file[name] and #by_file[name] or 0
                if count ~= 1 then
                    problems[#problems + 1] = name .. ": " .. count .. " rows, expected 1"
                end
            end
            for _, row in ipairs(ROWS) do
                if not present[row.file] then
                    problems[#problems + 1] = "row for a file not in the suite: " .. row.line
                end
                if row.ncells ~= 3 then
                    problems[#problems + 1] = "not | file | verdict | reason |: " .. row.line
                end
                if row.verdict ~= "accepted" and row.verdict ~= "rejected" then
                    problems[#problems + 1] = "verdict is not accepted or rejected: " .. row.line
                elseif row.verdict == "rejected" and not row.message then
                    problems[#problems + 1] = "rejection without a `qjson: ...` message: "
                                              .. row.line
                end
            end
            assert.equal("", table.concat(problems, "\n"))
        end)

        for _, name in ipairs(FILES.i) do
            it(name, function()
                local rows = by_file[name]
                assert.is_not_nil(rows, name .. " has no row in docs/conformance.md")
                local row = rows[1]
                local got, err = verdict(helper.read(DIR .. name))
                assert.equal(row.verdict, got, name .. ": " .. (err or "parsed"))
                if got == "rejected" then
                    assert.equal(row.message, err)
                end
            end)
        end
    end)

    describe("duplicate_keys = \"error\"", function()
        local ERROR = { duplicate_keys = "error" }

        for _, name in ipairs(DUPLICATE_KEY_FILES) do
            it("rejects " .. name .. " and accepts it by default", function()
                local text = helper.read(DIR .. name)
                local got, err = verdict(text, ERROR)
                assert.equal("rejected", got)
                assert.equal("qjson: duplicate key ", err:sub(1, 21))
                local d, serr = safe.parse(text, ERROR)
                assert.is_nil(d)
                assert.equal(err, serr)
                assert.equal("accepted", (verdict(text)))
                assert.equal("accepted", (verdict(text, { duplicate_keys = "last" })))
            end)
        end

        it("accepts every other y_ file", function()
            local checked = 0
            for _, name in ipairs(FILES.y) do
                if not HAS_DUPLICATE_KEY[name] then
                    local got, err = verdict(helper.read(DIR .. name), ERROR)
                    assert.equal("accepted", got, name .. ": " .. tostring(err))
                    checked = checked + 1
                end
            end
            assert.equal(#FILES.y - #DUPLICATE_KEY_FILES, checked)
        end)
    end)
end)

-- Randomized splice fuzz of the encoder: decodes a document to lazy
-- proxies, makes random writes (scalars, plain tables, proxies from other
-- documents, moves, deletes, holes, appends) mirrored on a cjson model,
-- and after every round checks that qjson.encode's output (source spans
-- spliced with re-encoded parts) is valid JSON that cjson and qjson decode
-- to the model, keeps untouched values byte for byte and repeats no key
-- when the inputs had none. The writes and checks are spec/mutation.lua's,
-- shared with differential_spec; this runs them on many more seeds and on
-- random documents (spec/gen.lua), until the time is up.
--
-- Usage: luajit tools/fuzz_encode.lua [seconds [first seed]]
-- (defaults: $FUZZ_SECONDS or 60, $FUZZ_SEED or the clock). Every seed
-- is reproducible: a failure prints it with the writes that led there.

package.path = "lua/?.lua;spec/?.lua;" .. package.path

local gen = require("gen")
local mutation = require("mutation")

local random = math.random
local write_json, random_node, obj = gen.write_json, gen.random_node, gen.obj
local chat_request, run_mutations = mutation.chat_request, mutation.run_mutations

local seconds = tonumber(arg[1] or os.getenv("FUZZ_SECONDS") or 60)
local first_seed = tonumber(arg[2] or os.getenv("FUZZ_SEED") or os.time())

-- A random object document: a few random values under random keys, some
-- repeated.
local function random_document()
    local members = {}
    for i = 1, random(1, 5) do
        members[i] = { random() < 0.2 and "dup" or "k" .. i, random_node(5) }
    end
    return write_json(obj(members))
end

-- One seed's document, its donors and whether they are free of repeated
-- keys (then the output must be too).
local function pick(seed)
    math.randomseed(seed)
    local chat = write_json(chat_request())
    local r = random()
    if r < 0.3 then
        return write_json(chat_request()), { chat, mutation.TWEET }, true, 8
    elseif r < 0.45 then
        return mutation.DUPLICATES, { mutation.DUPLICATES, chat }, false, 8
    elseif r < 0.5 then
        return mutation.TWEET, { chat, random_document() }, false, 4
    end
    return random_document(), { random_document(), random_document(), chat }, false, 6
end

local started = os.time()
local seed, rounds = first_seed, 0
repeat
    local text, donors, unique, n = pick(seed)
    local ok, err = pcall(run_mutations, text, seed, n, donors, unique)
    if not ok then
        io.stderr:write(("fuzz_encode: failure at seed %d (rerun: luajit %s 1 %d)\n%s\n")
                        :format(seed, arg[0], seed, tostring(err)))
        os.exit(1)
    end
    rounds = rounds + n
    seed = seed + 1
until os.time() - started >= seconds

print(("fuzz_encode: %d seeds (%d..%d), %d encode rounds checked in %ds, no failure")
      :format(seed - first_seed, first_seed, seed - 1, rounds, os.time() - started))

-- cellrate's batch: several decisions in one script call (docs/design/redis.md,
-- "Batches"). The one copy, redis/batch.lua, shipped as decide.lua. The stores
-- send this file with the line '--@decide.lua' replaced by decide.lua's bytes,
-- so that each decision runs exactly the script a call alone runs, as a
-- function of its own KEYS and ARGV.
--
-- KEYS: every decision's keys, in order. ARGV: the number of decisions, then
-- per decision: its number of keys, its number of ARGV words, and those words
-- (decide.lua's ARGV). The faces build these words with the core's
-- cr_redis_batch (core/cellrate/redis.h).
-- Returns a list of each decision's reply in order: decide.lua's reply, or
-- the words of its error reply (a key held under another algorithm, a key that
-- holds no cellrate state, a command refused such as OOM) as a list of one
-- string (a decision's reply has 5 or 6 fields; a nested error reply would
-- fail the whole reply in some clients): one decision's error is that
-- decision's alone, and the others are decided.
-- The decisions run in order, each on the state the ones before it wrote: a
-- key named twice decides the second time as if sent after the first.
-- The batch reads the server's TIME once, first: every decision of a batch is
-- made at that instant, as if each were sent alone at it (decide.lua takes
-- redis.ts and redis.tns, which a call alone has not, for its TIME).
local all_keys, all_argv = KEYS, ARGV
local pcall, type, tostring, tonumber = pcall, type, tostring, tonumber
local time = redis.call('TIME')

-- decide.lua's redis (its text is put in below): the server's calls, the
-- batch's one reading of TIME in seconds and nanoseconds, and a reading of
-- numbers that keeps each word's (the decisions repeat their limits' words)
local numbers = {} -- each word's number, read once a batch
local function number(word)
    local value = numbers[word]
    if value == nil then
        value = tonumber(word)
        if value ~= nil then
            numbers[word] = value
        end
    end
    return value
end
local redis = { -- luacheck: ignore 211
    call = redis.call,
    error_reply = redis.error_reply,
    ts = tonumber(time[1]),
    tns = tonumber(time[2]) * 1000,
    number = number,
}

local function decide(KEYS, ARGV)
--@decide.lua
end

-- Each decision's KEYS and ARGV: two tables the decisions share, each filled
-- anew (and cut to its length, so # reads it) before its decision runs (a
-- decision only reads them; a table made per decision cost more than its
-- arithmetic)
local replies, keys, argv = {}, {}, {}
local key_at, word_at = 0, 1
for call = 1, tonumber(all_argv[1]) do
    local nkeys, nwords = number(all_argv[word_at + 1]), number(all_argv[word_at + 2])
    for i = 1, nkeys do
        keys[i] = all_keys[key_at + i]
    end
    for i = nkeys + 1, #keys do
        keys[i] = nil
    end
    for i = 1, nwords do
        argv[i] = all_argv[word_at + 2 + i]
    end
    for i = nwords + 1, #argv do
        argv[i] = nil
    end
    key_at, word_at = key_at + nkeys, word_at + 2 + nwords
    local ok, reply = pcall(decide, keys, argv)
    if not ok then
        -- a command's error reply (Redis 7 raises it as a table), or a script error
        reply = type(reply) == 'table' and reply or { err = tostring(reply) }
    end
    if type(reply) == 'table' and reply.err then
        reply = { reply.err } -- its words, as a list of one: every client reads it alike
    end
    replies[call] = reply
end
return replies

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
-- The batch reads the server's TIME once: every decision of a batch is made
-- at one instant, as if each were sent alone at it (decide.lua's
-- redis.call('TIME') answers the batch's one reading).
local all_keys, all_argv = KEYS, ARGV
local pcall, type, tostring, tonumber = pcall, type, tostring, tonumber
local server = redis
local time -- the batch's TIME reply, read at the first decision that asks

-- decide.lua's redis (its text is put in below): the server's, but TIME
-- answers the one reading
local redis = { -- luacheck: ignore 211
    call = function(command, ...)
        if command == 'TIME' then
            time = time or server.call('TIME')
            return time
        end
        return server.call(command, ...)
    end,
    error_reply = server.error_reply,
}

local function decide(KEYS, ARGV)
--@decide.lua
end

local replies = {}
local key_at, word_at = 0, 1
for call = 1, tonumber(all_argv[1]) do
    local nkeys, nwords = tonumber(all_argv[word_at + 1]), tonumber(all_argv[word_at + 2])
    local keys, argv = {}, {}
    for i = 1, nkeys do
        keys[i] = all_keys[key_at + i]
    end
    for i = 1, nwords do
        argv[i] = all_argv[word_at + 2 + i]
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

-- sweep: removes tickets past their deadline (waiting past presence, claimed
-- past hold), at most `batch` per call so one call never blocks Redis long,
-- and reports how many tickets are left waiting (the queue's depth) and in
-- any state (0: the queue holds nothing; the broker may forget it).
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] batch (1..1000)
-- Replies:
--   {'swept', removed, more, depth, tracked}
--       more    = '1' when another call may find more
--       depth   = tickets in the waiting set after this call (ZCARD); with
--                 more = '1' it may still include stale ones
--       tracked = tickets of any state left (every record has a deadline)
--   {'invalid', what}
local batch = int_arg(ARGV[1], 1, MAX_BATCH)
if not batch then return invalid('batch') end
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', K_DEADLINES, '-inf', '(' .. num(now),
                       'LIMIT', 0, batch)
for _, id in ipairs(ids) do
  local rec = load_ticket(id)
  if rec then
    remove_ticket(rec)
  else
    redis.call('ZREM', K_DEADLINES, id)
    redis.call('ZREM', K_WAITING, id)
  end
end
local more = '0'
if #ids >= batch then more = '1' end
local depth = redis.call('ZCARD', K_WAITING)
local tracked = redis.call('ZCARD', K_DEADLINES)
return {'swept', num(#ids), more, num(depth), num(tracked)}

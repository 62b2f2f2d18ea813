-- release: removes claimed or claiming tickets once their pair is settled (the
-- match was committed, or the claimer goes back to claim-or-enqueue). It never
-- removes a waiting ticket: that is what cancel is for. One call takes every
-- ticket of a queue that a finalizer settled at once (both sides of a pair,
-- the pairs of a group commit).
-- Idempotent: a ticket already gone answers 'gone'.
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1..n] ticket ids (1..1000 of them)
-- Replies, with one ticket:
--   {'released', ticket}
--   {'waiting', ticket}
--   {'gone'}
--   {'invalid', what}
-- with several: {'each', outcome, outcome, ...}, one of released | waiting |
-- gone per ticket in ARGV order, or {'invalid', what} (nothing changed).
local n = #ARGV
if n < 1 or n > MAX_BATCH then return invalid('tickets') end
for i = 1, n do
  if not valid_id(ARGV[i], MAX_TICKET) then return invalid('ticket') end
end
if n == 1 then
  local ticket = ARGV[1]
  local rec = load_ticket(ticket)
  if not rec then return {'gone'} end
  if rec.state == 'waiting' then return {'waiting', ticket} end
  remove_ticket(rec, true) -- claimed tickets left the waiting set
  return {'released', ticket}
end
-- Several: every read and every removal in one call per key.
local raw = redis.call('HMGET', K_TICKETS, unpack(ARGV))
local out, gone, users, owners = {'each'}, {}, {}, {}
for i = 1, n do
  local rec = decode(raw[i] or nil)
  if not rec then
    out[i + 1] = 'gone'
  elseif rec.state == 'waiting' then
    out[i + 1] = 'waiting'
  else
    out[i + 1] = 'released'
    index_remove(rec)
    gone[#gone + 1] = rec.ticket
    users[#users + 1] = rec.user
    owners[#owners + 1] = rec.ticket
  end
end
if #gone > 0 then
  redis.call('ZREM', K_DEADLINES, unpack(gone))
  -- A user's pointer goes only while it still names the released ticket.
  local ptrs = {}
  for i = 1, #users do ptrs[i] = pointer_field(users[i]) end
  local now_at = redis.call('HMGET', K_TICKETS, unpack(ptrs))
  for i = 1, #users do
    if now_at[i] == owners[i] then gone[#gone + 1] = ptrs[i] end
  end
  redis.call('HDEL', K_TICKETS, unpack(gone))
end
return out

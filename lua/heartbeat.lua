-- heartbeat: extends the presence deadline of the user's current ticket, only
-- for its current token. A waiting ticket already past its deadline is not
-- revived (I6 of docs/design.md): it is removed and the answer is 'gone'. A claimed ticket past
-- its claim hold is gone too, so a waiter whose claimer died finds out and
-- re-enqueues itself (I2).
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] user id, ARGV[2] token, ARGV[3] ttl ms (1..3600000)
-- Replies:
--   {'alive', ticket, state, deadline}   state: waiting | claimed | claimer
--   {'gone'}
--   {'invalid', what}
local user, token = ARGV[1], ARGV[2]
if not valid_id(user, MAX_ID) then return invalid('user') end
if type(token) ~= 'string' or not string.find(token, '^%d+$') then
  return invalid('token')
end
local ttl = int_arg(ARGV[3], 1, MAX_TTL)
if not ttl then return invalid('ttl') end
local now = now_ms()
local current = pointer_of(user)
if not current then return {'gone'} end
local rec = load_ticket(current)
if not rec or rec.token ~= token then return {'gone'} end
if rec.state == 'waiting' then
  if rec.deadline < now then
    remove_ticket(rec)
    return {'gone'}
  end
  rec.deadline, rec.dl_s = now + ttl, num(now + ttl)
  store_ticket(rec)
  redis.call('ZADD', K_DEADLINES, rec.dl_s, rec.ticket)
else
  if rec.hold < now then
    remove_ticket(rec)
    return {'gone'}
  end
  -- presence only; the hold bound stays in force
  rec.deadline, rec.dl_s = now + ttl, num(now + ttl)
  store_ticket(rec)
end
return {'alive', rec.ticket, rec.state, rec.dl_s}

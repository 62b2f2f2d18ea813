-- enqueue: idempotent create of a waiting ticket (duplicate check, record,
-- FIFO score and presence deadline in one step: problem 8 of docs/design.md).
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] user id      ([%w._:@-], 1..128 bytes)
-- ARGV[2] ticket id    (caller-chosen, same charset; the idempotency key)
-- ARGV[3] node id      (node of the user's session, 1..64 bytes)
-- ARGV[4] attributes   (opaque, 0..4096 bytes)
-- ARGV[5] ttl ms       (presence window, 1..3600000; refreshed by heartbeat)
-- ARGV[6..8]  rules, rule values, avoid (queues with rules, as for claim;
--              KEYS[6] is then the queue's index)
-- Replies:
--   {'created', ticket, token, score, deadline}
--   {'exists',  ticket, token, score, deadline, state}  same ticket again: no-op
--   {'duplicate', other_ticket}  the user already has another live ticket
--   {'invalid', what}
local user, ticket, node, attrs, ttl = ticket_args(ARGV)
if not user then return ticket end -- the refusal

local now = now_ms()
local current, mine = pointer_and_record(user, ticket)
if current then
  local rec
  if current == ticket then rec = decode(mine) else rec = load_ticket(current) end
  if current == ticket and rec then
    return {'exists', ticket, rec.token, rec.score, num(rec.deadline),
            rec.state}
  end
  if rec and rec.state == 'waiting' and rec.deadline < now then
    remove_ticket(rec) -- a ghost of this user (problem 2): make room
  elseif rec then
    return {'duplicate', current}
  else
    redis.call('HDEL', K_TICKETS, pointer_field(user))
  end
end
if mine then
  return invalid('ticket id in use')
end

local rs, rk, avoid = rule_args(ARGV, 6)
if not rs then return rk end -- the refusal

local seq = int_s(redis.call('INCR', K_SEQ))
local dl_s = int_s(now + ttl)
local rec = {user = user, ticket = ticket, node = node, attrs = attrs,
             score = seq, token = seq, deadline = now + ttl, dl_s = dl_s,
             since = now, rs = rs, rk = rk, avoid = avoid}
make_waiting(rec, now)
return {'created', ticket, rec.token, seq, dl_s}

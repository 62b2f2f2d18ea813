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
local args, refused = ticket_args()
if not args then return refused end
local user, ticket, node, attrs, ttl =
  args.user, args.ticket, args.node, args.attrs, args.ttl

local now = now_ms()
local current = redis.call('HGET', K_USERS, user)
if current then
  local rec = load_ticket(current)
  if current == ticket and rec then
    return {'exists', ticket, rec.token, num(rec.score), num(rec.deadline),
            rec.state}
  end
  if rec and rec.state == 'waiting' and rec.deadline < now then
    remove_ticket(rec) -- a ghost of this user (problem 2): make room
  elseif rec then
    return {'duplicate', current}
  else
    redis.call('HDEL', K_USERS, user)
  end
end
if redis.call('HEXISTS', K_TICKETS, ticket) == 1 then
  return invalid('ticket id in use')
end

local rs, rk, avoid = ARGV[6] or '', ARGV[7] or '', ARGV[8] or ''
if #rs > 1024 or #rk > 2048 or #avoid > 4096 or string.find(rs, '%z')
    or string.find(rk, '%z') or string.find(avoid, '%z') then
  return invalid('rules') -- a NUL would break the record (lib/common.lua)
end
if rs ~= '' and (not K_IDX or not string.find(rk, '^[%w%._@%-|,+]*$')) then
  return invalid('rules')
end

local seq = redis.call('INCR', K_SEQ)
local rec = {user = user, ticket = ticket, node = node, attrs = attrs,
             score = seq, token = num(seq), deadline = now + ttl, since = now,
             rs = rs, rk = rk, avoid = avoid}
make_waiting(rec, now)
return {'created', ticket, rec.token, num(rec.score), num(rec.deadline)}

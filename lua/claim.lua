-- claim: claim-or-enqueue in one step (problems 1, 3, 4, 9 of docs/design.md).
-- Scans the oldest `scan` waiting tickets; a candidate is taken only when it
-- is live and this call's ZREM removed it. Stale candidates are removed and
-- counted. With no live candidate the caller is enqueued in the same step.
-- A caller that is already waiting takes its own ticket down first and, when
-- nothing is found, goes back at its original score.
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] user id, ARGV[2] ticket id, ARGV[3] node id, ARGV[4] attributes,
-- ARGV[5] ttl ms      (as for enqueue)
-- ARGV[6] scan        (candidates looked at, 1..100; default 10 in callers)
-- ARGV[7] hold ms     (how long a claimed pair may stay unfinalized, 1..600000)
-- ARGV[8] rescan      ('1' = the caller had a ticket; if it is gone, the
--                      caller was claimed and must not claim anybody)
-- Replies:
--   {'matched', ticket, token, p_user, p_ticket, p_node, p_attrs, p_score,
--    p_token, stale_removed}
--   {'queued', ticket, token, score, deadline, stale_removed, more}
--       more = '1' when the whole window was stale: scan again (problem 3)
--   {'claimed', ticket, token, by_user, by_ticket, by_node}  somebody claimed
--       the caller (by_* empty when the ticket is already gone)
--   {'duplicate', other_ticket}
--   {'invalid', what}
local args, refused = ticket_args()
if not args then return refused end
local user, ticket, node, attrs, ttl =
  args.user, args.ticket, args.node, args.attrs, args.ttl
local scan = int_arg(ARGV[6], 1, MAX_SCAN)
if not scan then return invalid('scan') end
local hold = int_arg(ARGV[7], 1, MAX_HOLD)
if not hold then return invalid('hold') end
local rescan = ARGV[8] == '1'

local now = now_ms()
local own = nil
local current = redis.call('HGET', K_USERS, user)
if current then
  local rec = load_ticket(current)
  if not rec then
    redis.call('HDEL', K_USERS, user)
  elseif current == ticket and rec.state ~= 'waiting' and rec.hold < now then
    -- The pair was never settled within its hold (its claimer died): the
    -- record lapses here as it would on a heartbeat or sweep.
    remove_ticket(rec)
  elseif current == ticket then
    if rec.state == 'claimed' then
      -- Still being finalized: the re-scan counts as presence.
      rec.deadline = now + ttl
      store_ticket(rec)
      return {'claimed', ticket, rec.token, rec.p_user, rec.p_ticket, rec.p_node}
    elseif rec.state == 'claimer' then
      -- A retried claim that already matched answers the same match.
      return {'matched', ticket, rec.token, rec.p_user, rec.p_ticket,
              rec.p_node, rec.p_attrs, rec.p_score, rec.p_token, '0'}
    end
    redis.call('ZREM', K_WAITING, ticket) -- re-scan: take our own ticket down
    own = rec
  elseif rec.state == 'waiting' and rec.deadline < now then
    remove_ticket(rec)
  else
    return {'duplicate', current}
  end
end
if not own then
  if redis.call('HEXISTS', K_TICKETS, ticket) == 1 then
    return invalid('ticket id in use')
  end
  if rescan then
    return {'claimed', ticket, '', '', '', ''}
  end
end

local stale, partner = 0, nil
local window = redis.call('ZRANGE', K_WAITING, 0, scan - 1)
for _, id in ipairs(window) do
  local cand = load_ticket(id)
  if not cand then
    redis.call('ZREM', K_WAITING, id)
  elseif cand.deadline < now then
    remove_ticket(cand) -- problem 2 / I6: never claimed, cleaned up
    stale = stale + 1
  elseif cand.user ~= user and redis.call('ZREM', K_WAITING, id) == 1 then
    partner = cand
    break
  end
end

if own then
  own.attrs, own.node = attrs, node
else
  local seq = redis.call('INCR', K_SEQ)
  own = {user = user, ticket = ticket, node = node, attrs = attrs,
         score = seq, token = num(seq)}
end
own.deadline = now + ttl

if partner then
  partner.state, partner.hold = 'claimed', now + hold
  partner.p_user, partner.p_ticket, partner.p_node = user, ticket, node
  partner.p_attrs, partner.p_score, partner.p_token = attrs, num(own.score), own.token
  store_ticket(partner)
  redis.call('ZADD', K_DEADLINES, partner.hold, partner.ticket)

  own.state, own.hold = 'claimer', now + hold
  own.p_user, own.p_ticket, own.p_node = partner.user, partner.ticket, partner.node
  own.p_attrs, own.p_score, own.p_token = partner.attrs, num(partner.score), partner.token
  store_ticket(own)
  redis.call('HSET', K_USERS, user, ticket)
  redis.call('ZADD', K_DEADLINES, own.hold, ticket)
  return {'matched', ticket, own.token, partner.user, partner.ticket,
          partner.node, partner.attrs, num(partner.score), partner.token,
          num(stale)}
end

make_waiting(own)
local more = '0'
if #window >= scan then more = '1' end
return {'queued', ticket, own.token, num(own.score), num(own.deadline),
        num(stale), more}

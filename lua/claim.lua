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
-- Queues with rules (docs/rules.md) add, with KEYS[6] the queue's index:
-- ARGV[9]  rules       (the queue's rule set, lib/rules.lua; '' = FIFO)
-- ARGV[10] rule values (the caller's, positional, '|'-separated)
-- ARGV[11] avoid       (the caller's recent partners, ','-separated)
-- and the 'queued' reply gains: windows, ms until they change next (-1:
-- never). The scan then walks only the index cells where a compatible
-- waiter can be, oldest first across them, `scan` candidates at most.
local args, refused = ticket_args()
if not args then return refused end
local user, ticket, node, attrs, ttl =
  args.user, args.ticket, args.node, args.attrs, args.ttl
local scan = int_arg(ARGV[6], 1, MAX_SCAN)
if not scan then return invalid('scan') end
local hold = int_arg(ARGV[7], 1, MAX_HOLD)
if not hold then return invalid('hold') end
local rescan = ARGV[8] == '1'
local rs, rk, avoid = ARGV[9] or '', ARGV[10] or '', ARGV[11] or ''
if #rs > 1024 or #rk > 2048 or #avoid > 4096 or string.find(rs, '%z')
    or string.find(rk, '%z') or string.find(avoid, '%z') then
  return invalid('rules') -- a NUL would break the record (lib/common.lua)
end
if rs ~= '' and (not K_IDX or not string.find(rk, '^[%w%._@%-|,+]*$')) then
  return invalid('rules')
end
local rules = nil
if rs ~= '' then rules = parse_rules(rs) end

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
    index_remove(rec)
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

local own_wait = 0
if own then own_wait = now - own.since end

local stale, partner, looked = 0, nil, 0
if not rules then
  local window = redis.call('ZRANGE', K_WAITING, 0, scan - 1)
  looked = #window
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
else
  -- Oldest first across the cells a compatible waiter can be in (problem
  -- 11, I7): a merge of their heads, each read lazily in pages.
  local me = {user = user, vals = split(rk, '|'), wait = own_wait,
              avoid = split(avoid, ',')}
  local PAGE = 8
  local cursors = {}
  for _, c in ipairs(cells_of(rules, me.vals, own_wait, true)) do
    local page = redis.call('ZRANGEBYLEX', K_IDX, '[' .. c .. ':',
                            '(' .. c .. ';', 'LIMIT', 0, PAGE)
    if #page > 0 then
      cursors[#cursors + 1] = {cell = c, page = page, pos = 1}
    end
  end
  local seen = {}
  while looked < scan and #cursors > 0 do
    local best, best_key = nil, nil
    for k, cur in ipairs(cursors) do
      local key = string.sub(cur.page[cur.pos], #cur.cell + 2)
      if not best_key or key < best_key then best, best_key = k, key end
    end
    local cur = cursors[best]
    local member = cur.page[cur.pos]
    cur.pos = cur.pos + 1
    if cur.pos > #cur.page then
      cur.page = redis.call('ZRANGEBYLEX', K_IDX, '(' .. member,
                            '(' .. cur.cell .. ';', 'LIMIT', 0, PAGE)
      cur.pos = 1
      if #cur.page == 0 then table.remove(cursors, best) end
    end
    local id = string.sub(best_key, 18)
    if not seen[id] then
      seen[id] = true
      local cand = load_ticket(id)
      if not cand or cand.state ~= 'waiting' then
        redis.call('ZREM', K_IDX, member) -- an entry that outlived its ticket
      elseif cand.deadline < now then
        remove_ticket(cand)
        stale = stale + 1
        looked = looked + 1
      elseif cand.user ~= user then
        looked = looked + 1
        local them = {user = cand.user, vals = split(cand.rk, '|'),
                      wait = now - cand.since, avoid = split(cand.avoid, ',')}
        if compatible(rules, me, them)
            and redis.call('ZREM', K_WAITING, id) == 1 then
          index_remove(cand)
          partner = cand
          break
        end
      end
    end
  end
end

if own then
  own.attrs, own.node = attrs, node
else
  local seq = redis.call('INCR', K_SEQ)
  own = {user = user, ticket = ticket, node = node, attrs = attrs,
         score = seq, token = num(seq), since = now}
end
own.deadline = now + ttl
own.rs, own.rk, own.avoid = rs, rk, avoid

if partner then
  partner.state, partner.hold = 'claimed', now + hold
  partner.p_user, partner.p_ticket, partner.p_node = user, ticket, node
  partner.p_attrs, partner.p_score, partner.p_token = attrs, num(own.score), own.token

  own.state, own.hold = 'claimer', now + hold
  own.p_user, own.p_ticket, own.p_node = partner.user, partner.ticket, partner.node
  own.p_attrs, own.p_score, own.p_token = partner.attrs, num(partner.score), partner.token
  -- Both records and both holds in one call each (every call costs ~2 us).
  redis.call('HSET', K_TICKETS, partner.ticket, encode(partner), ticket,
             encode(own))
  redis.call('HSET', K_USERS, user, ticket)
  redis.call('ZADD', K_DEADLINES, partner.hold, partner.ticket, own.hold,
             ticket)
  return {'matched', ticket, own.token, partner.user, partner.ticket,
          partner.node, partner.attrs, num(partner.score), partner.token,
          num(stale)}
end

make_waiting(own, now)
local more = '0'
if not rules and looked >= scan then more = '1' end
-- With rules only a window of nothing but stale tickets asks for another
-- look: incompatible ones would be the same again.
if rules and stale >= scan then more = '1' end
if rules then
  return {'queued', ticket, own.token, num(own.score), num(own.deadline),
          num(stale), more, describe_windows(rules, own_wait),
          num(next_change(rules, own_wait))}
end
return {'queued', ticket, own.token, num(own.score), num(own.deadline),
        num(stale), more}

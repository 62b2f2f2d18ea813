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
local user, ticket, node, attrs, ttl = ticket_args(ARGV)
if not user then return ticket end -- the refusal
local scan = int_arg(ARGV[6], 1, MAX_SCAN)
if not scan then return invalid('scan') end
local hold = int_arg(ARGV[7], 1, MAX_HOLD)
if not hold then return invalid('hold') end
local rescan = ARGV[8] == '1'
local rs, rk, avoid = rule_args(ARGV, 9)
if not rs then return rk end -- the refusal
local rules = nil
if rs ~= '' then rules = parse_rules(rs) end

local now = now_ms()
-- The common case first (lib/claim_fast.lua); it hands back what it cannot
-- decide, with the stale waiters it removed on the way.
local fast_stale = 0
if not rules and not rescan then
  local reply
  reply, fast_stale = claim_fast(user, ticket, node, attrs, ttl, scan, hold,
                                 now)
  if reply then return reply end
end
local own = nil
local current, mine = pointer_and_record(user, ticket)
if current then
  local rec
  if current == ticket then rec = decode(mine) else rec = load_ticket(current) end
  if not rec then
    redis.call('HDEL', K_TICKETS, pointer_field(user))
  elseif current == ticket and rec.state ~= 'waiting' and rec.hold < now then
    -- The pair was never settled within its hold (its claimer died): the
    -- record lapses here as it would on a heartbeat or sweep.
    remove_ticket(rec, true)
    mine = nil
  elseif current == ticket then
    if rec.state == 'claimed' then
      -- Still being finalized: the re-scan counts as presence.
      rec.deadline, rec.dl_s = now + ttl, nil
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
-- A ticket id in use (by a record the user does not point to, or by
-- another user) is refused; its record came with the pointer.
if not own then
  if mine then return invalid('ticket id in use') end
  if rescan then
    return {'claimed', ticket, '', '', '', ''}
  end
end

local own_wait = 0
if own then own_wait = now - own.since end

local stale, partner, looked = fast_stale, nil, 0
if not rules then
  -- The oldest `scan` waiters, popped one by one: a stale one is removed
  -- (problem 2 / I6: never claimed, cleaned up), the first live one of
  -- another user is the partner, a live one of this user (an older ticket
  -- it no longer points to) goes back at its place.
  local back = nil
  while looked < scan do
    local head = redis.call('ZPOPMIN', K_WAITING)
    local id = head[1]
    if not id then break end
    looked = looked + 1
    local cand = load_ticket(id)
    if not cand then
      -- an id whose record is gone: popped is removed
    elseif cand.deadline < now then
      remove_ticket(cand, true)
      stale = stale + 1
    elseif cand.user ~= user then
      partner = cand
      break
    else
      back = back or {}
      back[#back + 1] = head[2]
      back[#back + 1] = id
    end
  end
  if back then redis.call('ZADD', K_WAITING, unpack(back)) end
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
  local seq = int_s(redis.call('INCR', K_SEQ))
  own = {user = user, ticket = ticket, node = node, attrs = attrs,
         score = seq, token = seq, since = now}
end
local dl_s = int_s(now + ttl)
own.deadline, own.dl_s = now + ttl, dl_s
own.rs, own.rk, own.avoid = rs, rk, avoid
local stale_s = stale == 0 and '0' or int_s(stale)

if partner then
  local at = now + hold
  local at_s = int_s(at)
  partner.state, partner.hold, partner.hold_s = 'claimed', at, at_s
  partner.p_user, partner.p_ticket, partner.p_node = user, ticket, node
  partner.p_attrs, partner.p_score, partner.p_token = attrs, own.score,
    own.token

  own.state, own.hold, own.hold_s = 'claimer', at, at_s
  own.p_user, own.p_ticket, own.p_node = partner.user, partner.ticket,
    partner.node
  own.p_attrs, own.p_score, own.p_token = partner.attrs, partner.score,
    partner.token
  -- Both records, the pointer and both holds in two calls (every call
  -- counts).
  redis.call('HSET', K_TICKETS, partner.ticket, encode(partner), ticket,
             encode(own), pointer_field(user), ticket)
  redis.call('ZADD', K_DEADLINES, at_s, partner.ticket, at_s, ticket)
  return {'matched', ticket, own.token, partner.user, partner.ticket,
          partner.node, partner.attrs, partner.score, partner.token, stale_s}
end

make_waiting(own, now)
local more = '0'
if not rules and looked >= scan then more = '1' end
-- With rules only a window of nothing but stale tickets asks for another
-- look: incompatible ones would be the same again.
if rules and stale >= scan then more = '1' end
if rules then
  return {'queued', ticket, own.token, own.score, dl_s, stale_s, more,
          describe_windows(rules, own_wait), num(next_change(rules, own_wait))}
end
return {'queued', ticket, own.token, own.score, dl_s, stale_s, more}

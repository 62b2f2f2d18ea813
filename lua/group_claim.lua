-- group_claim: claim-or-enqueue for a queue with a shape (problems 1-4, 15
-- of docs/design.md; docs/groups.md). Files the caller's ticket (a party of
-- 1..party_max users) unless it is already waiting, then looks at the
-- oldest `scan` waiting tickets and makes the match lib/groups.lua's
-- form_group finds: every ticket of it leaves the waiting set in this call,
-- claimed under one group id with its team, or none does. The match need
-- not hold the caller (the oldest tickets go first, I7): the caller's node
-- settles it all the same.
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1] ticket id   ARGV[2] node   ARGV[3] ttl ms   ARGV[4] scan (1..100)
-- ARGV[5] hold ms (a claimed group's bound to be settled, 1..600000)
-- ARGV[6] rules (lib/rules.lua; '' none)   ARGV[7] shape (lib/groups.lua)
-- ARGV[8] n (members, 1..party_max); then n times: user, rule values
--         ('|'), avoid (','), balance value ('' none), attrs; then
--         then '1' for a re-scan, which never files the ticket anew
--         (else ''); then optionally the ready check's accept time in ms
--         (0..600000; 0 or absent: none): a group made is a proposal
--         (lib/proposals.lua), claimed for that time plus the hold; then
--         optionally a backfill request's `bf` (lib/groups.lua: "1,1,2;"
--         then former members): the ticket ('~' .. session) is that
--         request, its members the session's. A group a request anchors
--         fills its seats and is never a proposal.
-- Replies (own: the caller's ticket's state, 'claimed' or 'waiting', then
-- its token, score and deadline):
--   {'queued', ticket, token, score, deadline, stale_removed, more}
--   {'matched', group, stale_removed, own..., k, then k times: ticket,
--    node, score, token, team, n, then n times: user, attrs}
--       A retried claim whose first run made a group answers that group
--       while it is unsettled.
--   {'claimed', ticket, token, group}  the caller's ticket is in a group
--       another call made; that call's node settles it
--   {'duplicate', user, other_ticket}  a member is in another live ticket
--   {'gone', ticket}  a re-scan found the ticket neither waiting nor
--       claimed (settled, or lapsed): the caller's node asks the database
--   {'removed', ticket, why}  a re-scan found the ticket removed by a
--       ready check ('declined', 'timed_out'); it is gone now
--   {'invalid', what}
gbind(KEYS)
local ticket, node = ARGV[1], ARGV[2]
if not valid_gticket(ticket) then return invalid('ticket') end
if not valid_id(node, MAX_NODE) then return invalid('node') end
local ttl = int_arg(ARGV[3], 1, MAX_TTL)
if not ttl then return invalid('ttl') end
local scan = int_arg(ARGV[4], 1, MAX_SCAN)
if not scan then return invalid('scan') end
local hold = int_arg(ARGV[5], 1, MAX_HOLD)
if not hold then return invalid('hold') end
local rs = ARGV[6] or ''
local sh = parse_shape(ARGV[7])
if not sh then return invalid('shape') end
-- A backfill request holds the session's members: up to a match.
local n = int_arg(ARGV[8], 1, is_backfill(ticket) and sh.max or sh.party)
if not n then return invalid('party size') end
local members, seen = {}, {}
for i = 1, n do
  local b = 8 + (i - 1) * 5
  local user, rk, avoid, bal, attrs = ARGV[b + 1], ARGV[b + 2] or '',
    ARGV[b + 3] or '', ARGV[b + 4] or '', ARGV[b + 5] or ''
  if not valid_id(user, MAX_ID) or seen[user] then return invalid('user') end
  seen[user] = true
  if #rk > 2048 or #avoid > 4096 or string.find(rk, '%z')
      or string.find(avoid, '%z') or not string.find(rk, '^[%w%._@%-|,+]*$')
      or not string.find(bal, '^%-?[%d%.]*$') or #attrs > MAX_ATTRS then
    return invalid('member ' .. i)
  end
  members[i] = {user = user, rk = rk, avoid = avoid, bal = bal,
                attrs = attrs}
end
local rescan = ARGV[9 + n * 5] == '1'
local accept = 0
if (ARGV[10 + n * 5] or '') ~= '' then
  accept = int_arg(ARGV[10 + n * 5], 0, MAX_HOLD)
  if not accept then return invalid('accept') end
end
local bf = ARGV[11 + n * 5] or ''
if (bf ~= '') ~= is_backfill(ticket)
    or (bf ~= '' and not parse_bf(bf, n, sh.teams)) then
  return invalid('backfill')
end
local rules = nil
if rs ~= '' then
  if #rs > 1024 or string.find(rs, '%z') then return invalid('rules') end
  rules = parse_rules(rs)
end
local now = now_ms()
gsweep(now, 4)

-- The reply for a group: the group's tickets from its record, in order.
local function group_reply(gid, stale_s, own, tickets, state)
  local out = {'matched', gid, stale_s, state or own.state, own.token, own.score,
               int_s(own.deadline), #tickets}
  for _, t in ipairs(tickets) do
    out[#out + 1] = t.ticket
    out[#out + 1] = t.node
    out[#out + 1] = t.score
    out[#out + 1] = t.token
    out[#out + 1] = t.team
    out[#out + 1] = #t.members
    for _, m in ipairs(t.members) do
      out[#out + 1] = m.user
      out[#out + 1] = m.attrs
    end
  end
  return out
end

-- The unsettled group `gid`'s tickets (nil once it was settled).
local function group_tickets(gid)
  local rec = redis.call('HGET', G_TIX, 'g:' .. gid)
  if not rec then return nil end
  local ids = split(rec, ',')
  local raws = redis.call('HMGET', G_TIX, unpack(ids))
  local out = {}
  for i = 1, #ids do
    local t = gdecode(raws[i] or nil)
    if not t or t.group ~= gid then return nil end
    out[i] = t
  end
  return out
end

-- The members' pointers and the ticket's record, in one call.
local fields = {ticket}
for _, m in ipairs(members) do fields[#fields + 1] = '#' .. m.user end
local got = redis.call('HMGET', G_TIX, unpack(fields))
local own = gdecode(got[1] or nil)
if got[1] and not own then return invalid('ticket id in use') end
if own and bf == '' and own.members[1].user ~= members[1].user then
  return invalid('ticket id in use')
end
if own and own.state == 'claimed' and own.hold < now then
  -- Its claimer never settled it: a proposal is settled by its rule, a
  -- plain group's ticket lapses as on a sweep.
  if redis.call('HEXISTS', G_TIX, 'p:' .. own.group) == 1 then
    gdecide(own.group, now, true)
    own = gload(ticket)
  else
    gremove(own)
    own = nil
  end
end
if own and (own.state == 'declined' or own.state == 'timed_out') then
  guntomb(own) -- a ready check's tombstone: read once
  if rescan then return {'removed', ticket, own.state} end
  own = nil
elseif own and own.state ~= 'claimed' and own.deadline < now then
  gremove(own)
  own = nil
end
if own and own.made ~= '' then
  -- A retried claim answers the group it made, while that is unsettled.
  -- If another claim took the ticket into a group of its own since, the
  -- state says 'held' (not 'claimed', which reads as "in the group
  -- made"): the caller commits the made group and waits for its own.
  local made = group_tickets(own.made)
  local state = nil
  if own.state == 'claimed' and own.group ~= own.made then state = 'held' end
  if made then return group_reply(own.made, '0', own, made, state) end
end
if not own and rescan then return {'gone', ticket} end
if own and own.state == 'claimed' then
  own.deadline = now + ttl -- a re-scan counts as presence
  redis.call('HSET', G_TIX, own.ticket, gencode(own))
  return {'claimed', ticket, own.token, own.group}
end
for i, m in ipairs(members) do
  local cur = got[i + 1]
  -- A backfill request's members play: their pointers are not its own.
  if cur and cur ~= ticket and bf == '' then
    local other = gload(cur)
    if other and (other.state == 'claimed' or other.deadline >= now) then
      return {'duplicate', m.user, cur}
    end
    if other then
      gremove(other)
    else
      redis.call('HDEL', G_TIX, '#' .. m.user)
    end
  end
end

if own then
  -- Still waiting: a re-scan keeps its place and counts as presence.
  own.deadline, own.node, own.made = now + ttl, node, ''
else
  local seq = int_s(redis.call('INCR', G_SEQ))
  own = {ticket = ticket, node = node, score = seq, token = seq,
         state = 'waiting', deadline = now + ttl, hold = 0,
         since = int_s(now), group = '', team = '0', made = '',
         members = members, bf = bf}
  if bf == '' then
    local ptrs = {}
    for _, m in ipairs(members) do
      ptrs[#ptrs + 1] = '#' .. m.user
      ptrs[#ptrs + 1] = ticket
    end
    redis.call('HSET', G_TIX, unpack(ptrs))
  end
  redis.call('ZADD', G_WAIT, seq, ticket)
end

-- The oldest `scan` waiting tickets, live ones in FIFO order; stale ones
-- are removed (problem 2, I6) and counted (problem 3). The caller's record
-- is written below; its fresh deadline is the one that counts here.
local window = redis.call('ZRANGE', G_WAIT, 0, scan - 1)
-- Past a full window, the newest waiting tickets are candidates too (after
-- the oldest): a head of parties that cannot fill a match among
-- themselves (parties of two for teams of five) is completed by the
-- parties that arrive, instead of blocking everything behind it.
-- (A stale one there is left for a window or a sweep: the counts of
-- stale tickets are the window's, problem 3.)
local from_tail = {}
if #window == scan then
  local seen, tail = {}, redis.call('ZRANGE', G_WAIT, -TAIL, -1)
  for _, id in ipairs(window) do seen[id] = true end
  for _, id in ipairs(tail) do
    if not seen[id] then
      window[#window + 1] = id
      from_tail[id] = true
    end
  end
end
-- Candidates are decoded when the search first looks at them (most
-- claims fill a match from the first few): `get(i)` answers the live
-- ticket of slot i, or nil (a stale one of the window is removed and
-- counted then).
local slots, stale, own_in = {}, 0, false
if #window > 0 then
  local raws = redis.call('HMGET', G_TIX, unpack(window))
  for i, id in ipairs(window) do
    own_in = own_in or id == ticket
    slots[i] = {id = id, raw = raws[i], tail = from_tail[id]}
    if id == ticket then slots[i].t = own end
  end
end
-- And the caller's own waiting ticket, last.
if not own_in and own.state ~= 'claimed' then
  slots[#slots + 1] = {id = ticket, t = own}
end
-- Without rules the search reads a candidate's size alone (gpeek); with
-- rules it needs every member's rule values (gdecode).
local function get(i)
  local s = slots[i]
  if s.t ~= nil then return s.t or nil end
  local t
  if rules == nil then t = gpeek(s.raw or nil) else t = gdecode(s.raw or nil) end
  if s.tail and (not t or t.deadline < now) then
    s.t = false -- a stale one at the tail: left for a window or a sweep
  elseif not t then
    redis.call('ZREM', G_WAIT, s.id)
    stale = stale + 1
    s.t = false
  elseif t.deadline < now then
    local full = t
    if t.peek then full = gdecode(t.raw) end
    if full then gremove(full) else redis.call('ZREM', G_WAIT, s.id) end
    stale = stale + 1
    s.t = false
  else
    s.t = t
  end
  return s.t or nil
end

local group = nil
if bf == '' then
  group = form_group(#slots, get, sh, rules, now,
                     function(i) return is_backfill(slots[i].id) end)
elseif own.state ~= 'claimed' then
  -- A backfill request's own claim fills its seats only (the tickets
  -- that can make a match of their own make it at their own claims).
  for i, s in ipairs(slots) do
    if s.id == ticket then
      group = fill_seats(#slots, get, i, sh, rules, now)
      break
    end
  end
end
if group then -- the match's tickets in full
  for i, t in ipairs(group) do
    if t.peek then
      local full = gdecode(t.raw)
      if not full then return invalid('ticket record') end
      group[i] = full
    end
  end
end
local stale_s = int_s(stale)
local teams = group and (group.teams
  or assign_teams(group, sh.teams, sh.size, sh.balanced))
if group and group.teams then accept = 0 end -- a fill: no ready check
if teams then
  local gid = 'g' .. int_s(redis.call('INCR', G_SEQ))
  local at = now + accept + hold
  local ids, writes, holds = {}, {}, {}
  for i, t in ipairs(group) do
    t.state, t.hold, t.group, t.team = 'claimed', at, gid, int_s(teams[i])
    ids[i] = t.ticket
    holds[#holds + 1] = int_s(at)
    holds[#holds + 1] = t.ticket
  end
  own.made = gid
  for _, t in ipairs(group) do
    writes[#writes + 1] = t.ticket
    writes[#writes + 1] = gencode(t)
  end
  if own.state ~= 'claimed' then -- not in the group: written on its own
    writes[#writes + 1] = ticket
    writes[#writes + 1] = gencode(own)
    redis.call('ZADD', G_DL, int_s(own.deadline), ticket)
  end
  writes[#writes + 1] = 'g:' .. gid
  writes[#writes + 1] = table.concat(ids, ',')
  if accept > 0 then -- a proposal: the claimer and the deadline
    writes[#writes + 1] = 'p:' .. gid
    writes[#writes + 1] = node .. '|' .. int_s(now + accept)
    redis.call('ZADD', G_PEND, int_s(at), 'g' .. gid)
  end
  redis.call('ZREM', G_WAIT, unpack(ids))
  redis.call('HSET', G_TIX, unpack(writes))
  redis.call('ZADD', G_DL, unpack(holds))
  return group_reply(gid, stale_s, own, group)
end
redis.call('HSET', G_TIX, ticket, gencode(own))
redis.call('ZADD', G_DL, int_s(own.deadline), ticket)
local more = '0'
if stale >= scan then more = '1' end
return {'queued', ticket, own.token, own.score, int_s(own.deadline), stale_s,
        more}

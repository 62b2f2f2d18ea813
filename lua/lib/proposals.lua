-- proposals.lua: the ready check of a queue with a shape (problem 16 of
-- docs/design.md; docs/groups.md, "Ready check"). A claim on such a queue
-- makes its group a *proposal*: the tickets are claimed as any group's,
-- held until the deadline plus the claim hold (the proposal's lease), and
-- the group's field 'p:' .. gid in mm:{q}:gtix holds
--   claimer '|' deadline ['|' user '=' a|d ...]
-- (deadline: store ms; 'A' once every member accepted and the claimer
-- commits); its lease is in gpend ('g' .. gid). A ticket removed by the
-- check stays a tombstone: its record with state 'declined' or
-- 'timed_out', no waiting place, no member pointers, its end in gpend
-- ('t' .. ticket), until its owner's re-scan reads it (answered
-- 'removed') or a claim's sweep finds it expired.

local TOMB_MS = 120000 -- a tombstone outlives any owner's re-scan period

local function gprop(gid)
  local s = redis.call('HGET', G_TIX, 'p:' .. gid)
  if not s then return nil end
  local f = split(s, '|')
  local p = {claimer = f[1], accepted = f[2] == 'A',
             deadline = tonumber(f[2]) or 0, answers = {}, order = {}}
  for i = 3, #f do
    local u, a = string.match(f[i], '^(.+)=([ad])$')
    if u and not p.answers[u] then
      p.answers[u] = a
      p.order[#p.order + 1] = u
    end
  end
  return p
end

local function gprop_save(gid, p)
  local parts = {p.claimer, p.accepted and 'A' or int_s(p.deadline)}
  for _, u in ipairs(p.order) do parts[#parts + 1] = u .. '=' .. p.answers[u] end
  redis.call('HSET', G_TIX, 'p:' .. gid, table.concat(parts, '|'))
end

-- A ticket leaves the queue as a tombstone saying why (see above).
local function gtomb(t, why, now)
  redis.call('ZREM', G_WAIT, t.ticket)
  local fields = {}
  for _, m in ipairs(t.members) do
    if redis.call('HGET', G_TIX, '#' .. m.user) == t.ticket then
      fields[#fields + 1] = '#' .. m.user
    end
  end
  if #fields > 0 then redis.call('HDEL', G_TIX, unpack(fields)) end
  t.state, t.hold, t.group, t.team = why, 0, '', '0'
  t.deadline = now + TOMB_MS
  redis.call('HSET', G_TIX, t.ticket, gencode(t))
  redis.call('ZREM', G_DL, t.ticket)
  redis.call('ZADD', G_PEND, int_s(t.deadline), 't' .. t.ticket)
end

-- A tombstone read or expired goes.
local function guntomb(t)
  redis.call('HDEL', G_TIX, t.ticket)
  redis.call('ZREM', G_PEND, 't' .. t.ticket)
end

-- The live tickets of group gid (claimed in it), or nil once it settled.
local function gmembers(gid)
  local rec = redis.call('HGET', G_TIX, 'g:' .. gid)
  if not rec then return nil end
  local out = {}
  for _, id in ipairs(split(rec, ',')) do
    local t = gload(id)
    if t and t.state == 'claimed' and t.group == gid then out[#out + 1] = t end
  end
  return out
end

-- Decides proposal gid at `now` (the rule of docs/groups.md):
--   'gone'     no such proposal (settled, or never one);
--   'accepted' every member accepted: the claimer commits (marked so);
--   'pending'  answers are owed before the deadline and nobody declined;
--   'settled'  a member declined, or the deadline passed (or, with
--              `lapsed`, the lease): a ticket with a decliner becomes a
--              'declined' tombstone; past the deadline one with a silent
--              member 'timed_out'; one whose presence lapsed is removed;
--              every other ticket goes back to its original score.
-- Answers the status and, when settled, {ticket, outcome} pairs.
local function gdecide(gid, now, lapsed)
  local p = gprop(gid)
  if not p then
    redis.call('ZREM', G_PEND, 'g' .. gid)
    return 'gone', {}
  end
  local tickets = gmembers(gid)
  if not tickets then
    redis.call('HDEL', G_TIX, 'p:' .. gid)
    redis.call('ZREM', G_PEND, 'g' .. gid)
    return 'gone', {}
  end
  local declined, silent = false, false
  for _, t in ipairs(tickets) do
    for _, m in ipairs(t.members) do
      local a = p.answers[m.user]
      if a == 'd' then t.no = true; declined = true end
      if a == nil and not p.accepted then t.quiet = true; silent = true end
    end
  end
  local past = lapsed or (not p.accepted and now >= p.deadline)
  if not declined and not lapsed then
    if not silent then
      if not p.accepted then
        p.accepted = true
        gprop_save(gid, p)
      end
      return 'accepted', {}
    end
    if not past then return 'pending', {} end
  end
  local out = {}
  for _, t in ipairs(tickets) do
    local why
    if t.no then
      why = 'declined'
      gtomb(t, why, now)
    elseif past and t.quiet then
      why = 'timed_out'
      gtomb(t, why, now)
    elseif t.deadline < now then
      why = 'removed'
      gremove(t)
    else
      why = 'requeued'
      t.state, t.hold, t.group, t.team = 'waiting', 0, '', '0'
      redis.call('HSET', G_TIX, t.ticket, gencode(t))
      redis.call('ZADD', G_WAIT, t.score, t.ticket)
      redis.call('ZADD', G_DL, int_s(t.deadline), t.ticket)
    end
    out[#out + 1] = t.ticket
    out[#out + 1] = why
  end
  redis.call('HDEL', G_TIX, 'g:' .. gid, 'p:' .. gid)
  redis.call('ZREM', G_PEND, 'g' .. gid)
  return 'settled', out
end

-- Housekeeping a claim does on the side (bounded: `k` entries of gpend
-- past their time): an expired tombstone goes; a proposal whose lease
-- lapsed (its holder died) is settled by the rule above.
local function gsweep(now, k)
  local due = redis.call('ZRANGEBYSCORE', G_PEND, '-inf', int_s(now - 1),
                         'LIMIT', 0, k)
  for _, e in ipairs(due) do
    local id = string.sub(e, 2)
    if string.sub(e, 1, 1) == 'g' then
      gdecide(id, now, true)
    else
      local t = gload(id)
      if t and (t.state == 'declined' or t.state == 'timed_out') then
        guntomb(t)
      else
        redis.call('ZREM', G_PEND, e)
      end
    end
  end
end

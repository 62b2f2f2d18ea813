-- groups.lua: matches of N players in teams, from tickets of 1..P users
-- (problem 15 of docs/design.md; docs/groups.md), decided inside the one
-- atomic claim. A queue with a shape keeps its tickets apart from the pair
-- path's, under the same hash tag:
--   KEYS[1] mm:{q}:gwait   zset  ticket id -> FIFO score
--   KEYS[2] mm:{q}:seq     string counter for scores, tokens and group ids
--   KEYS[3] mm:{q}:gtix    hash  ticket id -> group ticket record;
--                                '#' .. user -> the ticket that user is in;
--                                'g:' .. group id -> the group's record
--   KEYS[4] mm:{q}:gdl     zset  ticket id -> ms (presence deadline while
--                                waiting, claim hold while claimed)
--   KEYS[5] mm:{q}:gpend   zset  'g' .. group id -> ms (a proposal's
--                                lease); 't' .. ticket id -> ms (a
--                                tombstone's end) (lib/proposals.lua)
-- A shape arrives as "min,max,teams,team_size,party_max,fill_ms,balanced"
-- (core/shape.cpp).

local G_WAIT, G_SEQ, G_TIX, G_DL, G_PEND

local function gbind(keys)
  G_WAIT, G_SEQ, G_TIX, G_DL, G_PEND = keys[1], keys[2], keys[3], keys[4],
    keys[5]
end

local function parse_shape(s)
  local f = {}
  for x in string.gmatch(s or '', '[^,]+') do f[#f + 1] = tonumber(x) end
  if #f ~= 7 then return nil end
  local sh = {min = f[1], max = f[2], teams = f[3], size = f[4],
              party = f[5], fill = f[6], balanced = f[7] == 1}
  if not sh.min or sh.min < 2 or sh.max < sh.min or sh.max > 64
      or sh.party < 1 or sh.party > sh.max
      or (sh.teams > 0 and sh.teams * sh.size ~= sh.max) then
    return nil
  end
  return sh
end

-- A group ticket as one string: '\2', then NUL-terminated fields (ticket
-- node score token state deadline hold since group team made n), then n
-- times (user rk avoid bal alen), then the members' attrs back to back.
-- Every field but the attrs holds no NUL (checked on the way in). group,
-- team: the group it is claimed in; made: the group its own last claim
-- made (a retried claim answers that one while it is unsettled). A
-- backfill request (below) carries `bf` after the attrs: its members'
-- teams and the session's former members, "1,1,2;u7,u9" (absent in
-- other records).
local function gencode(t)
  local parts = {'\2', t.ticket, '\0', t.node, '\0', t.score, '\0', t.token,
                 '\0', t.state, '\0', int_s(t.deadline), '\0', int_s(t.hold),
                 '\0', t.since, '\0', t.group or '', '\0', t.team or '0', '\0',
                 t.made or '', '\0', #t.members, '\0'}
  local attrs = {}
  for _, m in ipairs(t.members) do
    parts[#parts + 1] = m.user .. '\0' .. m.rk .. '\0' .. m.avoid .. '\0'
      .. m.bal .. '\0' .. #m.attrs .. '\0'
    attrs[#attrs + 1] = m.attrs
  end
  return table.concat(parts) .. table.concat(attrs) .. (t.bf or '')
end

local function gdecode(s)
  if not s or string.byte(s, 1) ~= 2 then return nil end
  local pos, f = 2, {}
  local function field()
    local z = string.find(s, '\0', pos, true)
    if not z then return nil end
    local v = string.sub(s, pos, z - 1)
    pos = z + 1
    return v
  end
  for i = 1, 12 do
    f[i] = field()
    if not f[i] then return nil end
  end
  local t = {ticket = f[1], node = f[2], score = f[3], token = f[4],
             state = f[5], deadline = tonumber(f[6]) or 0,
             hold = tonumber(f[7]) or 0, since = f[8], group = f[9],
             team = f[10], made = f[11], members = {}}
  local n = tonumber(f[12]) or 0
  for i = 1, n do
    local user, rk, avoid, bal, alen = field(), field(), field(), field(),
      field()
    if not alen then return nil end
    t.members[i] = {user = user, rk = rk, avoid = avoid, bal = bal,
                    alen = tonumber(alen) or 0}
  end
  for _, m in ipairs(t.members) do
    m.attrs = string.sub(s, pos, pos + m.alen - 1)
    pos = pos + m.alen
  end
  t.bf = string.sub(s, pos)
  return t
end

-- What the search needs of a record, without decoding it (the members,
-- their rule values and attributes stay in `raw` until the ticket is in a
-- match): ticket, state, deadline, since and the party size. nil when it
-- is not a record.
local PEEK = '^\2([^%z]*)%z[^%z]*%z[^%z]*%z[^%z]*%z([^%z]*)%z([^%z]*)%z' ..
  '[^%z]*%z([^%z]*)%z[^%z]*%z[^%z]*%z[^%z]*%z([^%z]*)%z'
local function gpeek(s)
  if not s then return nil end
  local ticket, state, deadline, since, n = string.match(s, PEEK)
  if not ticket then return nil end
  return {peek = true, raw = s, ticket = ticket, state = state,
          deadline = tonumber(deadline) or 0, since = since,
          n = tonumber(n) or 0}
end

-- A ticket's party size (a peeked one's or a decoded one's).
local function gsize(t) return t.n or #t.members end

-- BACKFILL (docs/groups.md "Backfill"). A session with open seats asks for
-- players with a request: a ticket whose id is '~' .. the session id, whose
-- members are the session's (no member pointers: they play), with `bf` as
-- above. It waits and is re-scanned as a ticket, in FIFO order by the
-- time it was filed; it is never a candidate of another ticket's match,
-- only an anchor that other tickets fill (`fill_seats`).
local function is_backfill(id) return string.sub(id, 1, 1) == '~' end

-- A group ticket id: a client's, or a backfill request's.
local function valid_gticket(s)
  if type(s) ~= 'string' then return false end
  if is_backfill(s) then return valid_id(string.sub(s, 2), MAX_TICKET - 1) end
  return valid_id(s, MAX_TICKET)
end

-- A backfill request's `bf`: the members' teams (numbers) and the former
-- members (a set); nil when malformed.
local function parse_bf(bf, n, teams)
  local sep = string.find(bf or '', ';', 1, true)
  if not sep then return nil end
  local fixed, former = {}, {}
  for x in string.gmatch(string.sub(bf, 1, sep - 1), '[^,]+') do
    local k = tonumber(x)
    if not k or k < 0 or k > teams or k % 1 ~= 0 then return nil end
    if (teams == 0) ~= (k == 0) then return nil end
    fixed[#fixed + 1] = k
  end
  if #fixed ~= n then return nil end
  for u in string.gmatch(string.sub(bf, sep + 1), '[^,]+') do
    if not valid_id(u, MAX_ID) then return nil end
    former[u] = true
  end
  return fixed, former
end

local function gload(id)
  return gdecode(redis.call('HGET', G_TIX, id))
end

-- Removes a ticket: its record, its place, its deadline, and each member's
-- pointer that is still on it.
local function gremove(t)
  redis.call('ZREM', G_WAIT, t.ticket)
  redis.call('ZREM', G_DL, t.ticket)
  local fields = {t.ticket}
  for _, m in ipairs(t.members) do
    if redis.call('HGET', G_TIX, '#' .. m.user) == t.ticket then
      fields[#fields + 1] = '#' .. m.user
    end
  end
  redis.call('HDEL', G_TIX, unpack(fields))
end

-- The sum of a ticket's balance values.
local function gvalue(t)
  local v = 0
  for _, m in ipairs(t.members) do v = v + (tonumber(m.bal) or 0) end
  return v
end

-- Can tickets of these sizes be placed whole in `teams` teams of `size`?
-- (Largest first, with backtracking: a match holds few tickets.)
local function packable(sizes, teams, size)
  if teams == 0 then return true end
  if teams == 2 then
    -- Two teams: some parties must sum to between total - size and size
    -- (the sums one team can reach, without a closure or a sort).
    local total, reach = 0, {[0] = true}
    for _, s in ipairs(sizes) do
      total = total + s
      for v = size, s, -1 do
        if reach[v - s] then reach[v] = true end
      end
    end
    if total > 2 * size then return false end
    for v = math.max(0, total - size), size do
      if reach[v] then return true end
    end
    return false
  end
  local sorted = {}
  for i, s in ipairs(sizes) do sorted[i] = s end
  table.sort(sorted, function(a, b) return a > b end)
  local room = {}
  for k = 1, teams do room[k] = size end
  local function place(i)
    if i > #sorted then return true end
    local tried = {}
    for k = 1, teams do
      if room[k] >= sorted[i] and not tried[room[k]] then
        tried[room[k]] = true
        room[k] = room[k] - sorted[i]
        if place(i + 1) then return true end
        room[k] = room[k] + sorted[i]
      end
    end
    return false
  end
  return place(1)
end

-- Team of each ticket of a match: every team at most `size` players, the
-- player counts as even as the parties allow, and with `balanced` the
-- spread of the teams' value sums as small as possible: exactly for two
-- teams up to 16 tickets (every split is tried), else largest value first
-- into the lightest team with room. Returns a list of team numbers
-- (1-based, by ticket), or nil when no placement exists.
local EXACT_TICKETS = 16
local function assign_teams(tickets, teams, size, balanced)
  local k = #tickets
  if teams == 0 then
    local out = {}
    for i = 1, k do out[i] = 0 end
    return out
  end
  local players = 0
  for _, t in ipairs(tickets) do players = players + #t.members end
  -- The fullest a team may be for the counts to be as even as they can.
  local even_hi = math.ceil(players / teams)
  if teams == 2 and k <= EXACT_TICKETS then
    local best, best_key = nil, nil
    local total = 0
    local vals = {}
    for i, t in ipairs(tickets) do
      vals[i] = balanced and gvalue(t) or 0
      total = total + vals[i]
    end
    -- Ticket 1 stays in team 1 (the two halves are symmetric).
    for mask = 0, 2 ^ (k - 1) - 1 do
      local n1, v1 = #tickets[1].members, vals[1]
      local m = mask
      for i = 2, k do
        if m % 2 == 1 then
          n1 = n1 + #tickets[i].members
          v1 = v1 + vals[i]
        end
        m = math.floor(m / 2)
      end
      local n2 = players - n1
      if n1 <= size and n2 <= size then
        local key = math.abs(n1 - n2) * 1e15 + math.abs(2 * v1 - total)
        if not best_key or key < best_key then best, best_key = mask, key end
      end
    end
    if not best then return nil end
    local out, m = {1}, best
    for i = 2, k do
      out[i] = (m % 2 == 1) and 1 or 2
      m = math.floor(m / 2)
    end
    return out
  end
  -- Greedy: largest party first (then largest value), into the team with
  -- the fewest players (then the lowest sum) that has room.
  local order = {}
  for i = 1, k do order[i] = i end
  table.sort(order, function(a, b)
    local na, nb = #tickets[a].members, #tickets[b].members
    if na ~= nb then return na > nb end
    if balanced then return gvalue(tickets[a]) > gvalue(tickets[b]) end
    return a < b
  end)
  local count, sum, out = {}, {}, {}
  for t = 1, teams do count[t], sum[t] = 0, 0 end
  for _, i in ipairs(order) do
    local n, pick = #tickets[i].members, nil
    for t = 1, teams do
      if count[t] + n <= math.min(size, even_hi + n - 1) then
        if not pick or count[t] < count[pick]
            or (count[t] == count[pick] and sum[t] < sum[pick]) then
          pick = t
        end
      end
    end
    if not pick then
      for t = 1, teams do
        if count[t] + n <= size and (not pick or count[t] < count[pick]) then
          pick = t
        end
      end
    end
    if not pick then return nil end
    out[i] = pick
    count[pick] = count[pick] + n
    sum[pick] = sum[pick] + (balanced and gvalue(tickets[i]) or 0)
  end
  return out
end

-- Are two tickets' members compatible, each with each (rules.lua)? A
-- ticket's members wait as long as the ticket.
local function tickets_compatible(rules, a, b, now)
  if not rules then return true end
  for _, x in ipairs(a.members) do
    local sx = {user = x.user, vals = split(x.rk, '|'),
                wait = now - tonumber(a.since), avoid = split(x.avoid, ',')}
    for _, y in ipairs(b.members) do
      local sy = {user = y.user, vals = split(y.rk, '|'),
                  wait = now - tonumber(b.since), avoid = split(y.avoid, ',')}
      if not compatible(rules, sx, sy) then return false end
    end
  end
  return true
end

-- Can ticket `c` join `group` (of `players` players, party sizes `sizes`)?
local function fits(c, group, sizes, players, sh, rules, now)
  if is_backfill(c.ticket) then return false end
  local n = gsize(c)
  if players + n > sh.max then return false end
  for _, g in ipairs(group) do
    if not tickets_compatible(rules, g, c, now) then return false end
  end
  sizes[#sizes + 1] = n
  local ok = packable(sizes, sh.teams, sh.size)
  sizes[#sizes] = nil
  return ok
end

-- When the first pass stops short of a full match (parties that fit no
-- more, e.g. 2+3+2+2 of a 5-vs-5), a bounded search for the earliest
-- tickets in FIFO order that fill it: depth first, taking a ticket before
-- skipping it; without rules tickets of one size are alike, so one of each
-- size is tried per step. At most SEARCH_STEPS candidates are looked at in
-- one claim, over all its anchors (`budget.left`). `get(i)`: the live
-- ticket of candidate i (of n), or nil.
local SEARCH_STEPS = 400
local function fill_exactly(n, get, a, sh, rules, now, budget)
  local anchor = get(a)
  local group, sizes = {anchor}, {gsize(anchor)}
  local players = gsize(anchor)
  local function dfs(i)
    if players == sh.max then return true end
    local tried, ntried = {}, 0
    for j = i, n do
      -- Every party size tried at this depth: nothing new further on.
      if rules == nil and ntried >= sh.party then return false end
      budget.left = budget.left - 1
      if budget.left < 0 then return false end
      local c = get(j)
      local k = c and gsize(c)
      -- Without rules a ticket fits or not by its size alone.
      local fresh = c and not (rules == nil and tried[k])
      if fresh then
        tried[k] = true
        ntried = ntried + 1
      end
      if fresh and fits(c, group, sizes, players, sh, rules, now) then
        group[#group + 1], sizes[#sizes + 1] = c, k
        players = players + k
        if dfs(j + 1) then return true end
        group[#group], sizes[#sizes] = nil, nil
        players = players - k
      end
    end
    return false
  end
  if dfs(a + 1) then return group end
  return nil
end

-- Places parties of `sizes` whole into `rooms` (seats left per team):
-- the team of each, by index, or nil. Largest first, with backtracking (a
-- fill holds few tickets); teams with the most room are tried first.
local function place_rooms(sizes, rooms)
  local order = {}
  for i = 1, #sizes do order[i] = i end
  table.sort(order, function(x, y) return sizes[x] > sizes[y] end)
  local out, left = {}, {}
  for k, r in ipairs(rooms) do left[k] = r end
  local function place(j)
    if j > #order then return true end
    local i = order[j]
    local ks = {}
    for k = 1, #left do ks[k] = k end
    table.sort(ks, function(x, y) return left[x] > left[y] end)
    for _, k in ipairs(ks) do
      if left[k] >= sizes[i] then
        left[k] = left[k] - sizes[i]
        out[i] = k
        if place(j + 1) then return true end
        left[k] = left[k] + sizes[i]
      end
    end
    return false
  end
  if place(1) then return out end
  return nil
end

-- Fills the backfill request of candidate `a` (docs/groups.md "Backfill"):
-- every live waiting ticket in FIFO order (older ones than the request
-- too) that fits — room left under `max` and in a team for the whole
-- party, no former member of the session, every member compatible with
-- every member so far (the session's included) — until the seats are full.
-- A fill of at least one ticket is made (seats are filled as players come,
-- not all at once). Returns the tickets, the request first, with
-- `.teams` (the request 0, then each ticket's team, 1-based; 0 without
-- teams), or nil.
local function fill_seats(n, get, a, sh, rules, now)
  local req = get(a)
  if req and req.peek then req = gdecode(req.raw) end
  if not req then return nil end
  local fixed, former = parse_bf(req.bf, #req.members, sh.teams)
  if not fixed then return nil end
  local rooms = {}
  if sh.teams > 0 then
    for k = 1, sh.teams do rooms[k] = sh.size end
    for _, k in ipairs(fixed) do rooms[k] = rooms[k] - 1 end
  else
    rooms[1] = sh.max - #req.members
  end
  local group, sizes, players = {req}, {}, #req.members
  local placed = nil
  for i = 1, n do
    if players >= sh.max then break end
    local c = (i ~= a) and get(i)
    if c and not is_backfill(c.ticket) and players + gsize(c) <= sh.max then
      if c.peek and (rules or next(former)) then c = gdecode(c.raw) end
      local ok = c ~= nil
      if ok and next(former) then
        for _, m in ipairs(c.members) do
          if former[m.user] then ok = false end
        end
      end
      if ok then
        for _, g in ipairs(group) do
          if not tickets_compatible(rules, g, c, now) then
            ok = false
            break
          end
        end
      end
      if ok then
        sizes[#sizes + 1] = gsize(c)
        local at = place_rooms(sizes, rooms)
        if at then
          group[#group + 1] = c
          players = players + gsize(c)
          placed = at
        else
          sizes[#sizes] = nil
        end
      end
    end
  end
  if #group == 1 then return nil end
  group.teams = {0}
  for i = 1, #sizes do
    group.teams[i + 1] = sh.teams > 0 and placed[i] or 0
  end
  return group
end

-- The match to make from live waiting tickets in FIFO order (`get(i)`, i
-- = 1..n: the live ticket of candidate i, or nil; `bf(i)`: whether
-- candidate i is a backfill request, read from its id): starting from the
-- oldest (then the next, when the oldest cannot be part of one within the
-- window), adds every ticket that fits — room left, compatible with every
-- member so far, parties still placeable whole in the teams — until the
-- match is full, or, when the oldest of it has waited `fill` ms, of at
-- least `min` players; a full match found by the bounded search above goes
-- before a short one. A backfill request anchors in its FIFO place, as a
-- ticket filed then would (`fill_seats`), and is not counted among the
-- anchors: a window holds few. Returns the tickets, or nil.
local MAX_ANCHORS = 8
-- Newest waiting tickets a claim reads besides its window (group_claim).
local TAIL = 16
local function form_group(n, get, sh, rules, now, bf)
  local budget = {left = SEARCH_STEPS}
  local anchors = 0
  -- Without rules, a later anchor of a size that failed has fewer
  -- candidates of the same kinds and waited less: it fails too.
  local failed = {}
  for a = 1, n do
    if bf and bf(a) then
      local group = get(a) and fill_seats(n, get, a, sh, rules, now)
      if group then return group end
    elseif anchors < MAX_ANCHORS then
      local first = get(a)
      if first and not (rules == nil and failed[gsize(first)]) then
        anchors = anchors + 1
        local group, sizes, players = {first}, {gsize(first)}, gsize(first)
        for i = a + 1, n do
          if players == sh.max then break end
          local c = get(i)
          if c and fits(c, group, sizes, players, sh, rules, now) then
            group[#group + 1] = c
            sizes[#sizes + 1] = gsize(c)
            players = players + gsize(c)
          end
        end
        if players == sh.max then return group end
        local exact = fill_exactly(n, get, a, sh, rules, now, budget)
        if exact then return exact end
        if players >= sh.min and now - tonumber(first.since) >= sh.fill then
          return group
        end
        failed[gsize(first)] = true
      end
    end
  end
  return nil
end

-- group_answer: members' answers to proposals of one queue (the ready
-- check, problem 16 of docs/design.md; lib/proposals.lua), in order, as if
-- each were its own call: a node's broker sends every answer it holds for
-- the queue in one call. The first answer of a member stands: the same
-- answer again, or another one, answers the standing one (idempotent). An
-- empty answer only reads. Refused once the deadline passed or every
-- member accepted (the claimer decides then).
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV: n triples (1 <= n <= 300): group id, user, 'accept' | 'decline' | ''
-- Replies: 8 fields per answer, in order:
--   'answered', standing ('accept'|'decline'|''), claimer, deadline,
--    players, accepted, declined ('1'|'0'), complete ('1' every member
--    accepted)
--   'ended', '' x 7       no proposal of that id (settled, or past its
--                         deadline)
--   'not_member', '' x 7  the user is in none of its tickets
-- or {'invalid', what} for the whole call.
gbind(KEYS)
local n = #ARGV / 3
if n < 1 or n > 300 or #ARGV % 3 ~= 0 then return invalid('answers') end
for i = 1, #ARGV, 3 do
  if not valid_id(ARGV[i], MAX_ID) then return invalid('group') end
  if not valid_id(ARGV[i + 1], MAX_ID) then return invalid('user') end
  local a = ARGV[i + 2]
  if a ~= 'accept' and a ~= 'decline' and a ~= '' then
    return invalid('answer')
  end
end
local now = now_ms()
local seen, dirty, out = {}, {}, {}
local function short(status)
  for _, x in ipairs({status, '', '', '', '', '', '', ''}) do
    out[#out + 1] = x
  end
end
for i = 1, #ARGV, 3 do
  local gid, user, ans = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  -- A proposal and its tickets are read once per call.
  local g = seen[gid]
  if not g then
    g = {p = gprop(gid)}
    if g.p then g.tickets = gmembers(gid) end
    seen[gid] = g
  end
  local p, tickets = g.p, g.tickets
  local member, players, accepted, declined = false, 0, 0, false
  if p and tickets then
    for _, t in ipairs(tickets) do
      for _, m in ipairs(t.members) do
        players = players + 1
        member = member or m.user == user
      end
    end
  end
  if not (p and tickets) or (not p.accepted and now >= p.deadline) then
    short('ended')
  elseif not member then
    short('not_member')
  else
    if not p.accepted and ans ~= '' and not p.answers[user] then
      p.answers[user] = string.sub(ans, 1, 1)
      p.order[#p.order + 1] = user
      dirty[gid] = true
    end
    for _, t in ipairs(tickets) do
      for _, m in ipairs(t.members) do
        local a = p.answers[m.user]
        if a == 'a' or p.accepted then accepted = accepted + 1 end
        if a == 'd' then declined = true end
      end
    end
    local standing = ''
    if p.accepted or p.answers[user] == 'a' then standing = 'accept' end
    if p.answers[user] == 'd' then standing = 'decline' end
    local deadline = p.accepted and '0' or int_s(p.deadline)
    for _, x in ipairs({'answered', standing, p.claimer, deadline,
                        int_s(players), int_s(accepted),
                        declined and '1' or '0',
                        accepted == players and '1' or '0'}) do
      out[#out + 1] = x
    end
  end
end
for gid in pairs(dirty) do gprop_save(gid, seen[gid].p) end
return out

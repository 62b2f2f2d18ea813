-- group_answer: a member's answer to a proposal (the ready check, problem
-- 16 of docs/design.md; lib/proposals.lua). The first answer of a member
-- stands: the same answer again, or another one, answers the standing one
-- (idempotent). An empty answer only reads. Refused once the deadline
-- passed or every member accepted (the claimer decides then).
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1] group id   ARGV[2] user   ARGV[3] 'accept' | 'decline' | ''
-- Replies:
--   {'answered', standing ('accept'|'decline'|''), claimer, deadline,
--    players, accepted, declined ('1'|'0'), complete ('1' every member
--    accepted)}
--   {'ended'}        no proposal of that id (settled, or past its deadline)
--   {'not_member'}   the user is in none of its tickets
--   {'invalid', what}
gbind(KEYS)
local gid, user, ans = ARGV[1], ARGV[2], ARGV[3] or ''
if not valid_id(gid, MAX_ID) then return invalid('group') end
if not valid_id(user, MAX_ID) then return invalid('user') end
if ans ~= 'accept' and ans ~= 'decline' and ans ~= '' then
  return invalid('answer')
end
local p = gprop(gid)
if not p then return {'ended'} end
local tickets = gmembers(gid)
if not tickets then return {'ended'} end
local member, players, accepted, declined = false, 0, 0, false
for _, t in ipairs(tickets) do
  for _, m in ipairs(t.members) do
    players = players + 1
    member = member or m.user == user
  end
end
if not member then return {'not_member'} end
local now = now_ms()
if not p.accepted then
  if now >= p.deadline then return {'ended'} end
  if ans ~= '' and not p.answers[user] then
    p.answers[user] = string.sub(ans, 1, 1)
    p.order[#p.order + 1] = user
    gprop_save(gid, p)
  end
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
return {'answered', standing, p.claimer, deadline, int_s(players),
        int_s(accepted), declined and '1' or '0',
        accepted == players and '1' or '0'}

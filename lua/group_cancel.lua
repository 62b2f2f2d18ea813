-- group_cancel: a member of a queued ticket leaves (problems 5, 8 of
-- docs/design.md; docs/groups.md): compare-and-delete by the ticket's
-- token. A waiting ticket is removed whole (a party is never split: its
-- other members are told and may join again); a claimed one is not, its
-- group's claimer settles it and honours the cancel at its checkpoints.
-- A cancel of a ticket in an open proposal (the ready check) is the
-- member's decline there (lib/proposals.lua), even after an accept: the
-- member walked away.
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1] user id (any member of the ticket), ARGV[2] token
-- Replies:
--   {'cancelled', ticket}
--   {'in_flight', ticket, group}
--   {'stale_token', ticket}   the user's current ticket has another token
--   {'not_found'}
--   {'invalid', what}
gbind(KEYS)
local user, token = ARGV[1], ARGV[2]
if not valid_id(user, MAX_ID) then return invalid('user') end
if type(token) ~= 'string' or not string.find(token, '^%d+$') then
  return invalid('token')
end
local current = redis.call('HGET', G_TIX, '#' .. user)
if not current then return {'not_found'} end
local t = gload(current)
if not t then
  redis.call('HDEL', G_TIX, '#' .. user)
  return {'not_found'}
end
if t.token ~= token then return {'stale_token', current} end
if t.state == 'claimed' then
  local p = gprop(t.group)
  if p and not p.accepted and now_ms() < p.deadline then
    if not p.answers[user] then p.order[#p.order + 1] = user end
    p.answers[user] = 'd'
    gprop_save(t.group, p)
  end
  return {'in_flight', current, t.group}
end
gremove(t)
return {'cancelled', current}

-- group_release: removes the tickets of a settled group (its match was
-- committed, or it was given up) and the group's record. Waiting tickets
-- are never removed here (that is what cancel is for). Idempotent: a group
-- released before answers 'gone'.
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1] group id
-- Replies: {'released', k} (k tickets removed) | {'gone'} | {'invalid', what}
gbind(KEYS)
local gid = ARGV[1]
if not valid_id(gid, MAX_ID) then return invalid('group') end
local rec = redis.call('HGET', G_TIX, 'g:' .. gid)
if not rec then return {'gone'} end
local k = 0
for _, id in ipairs(split(rec, ',')) do
  local t = gload(id)
  if t and t.state == 'claimed' and t.group == gid then
    gremove(t)
    k = k + 1
  end
end
redis.call('HDEL', G_TIX, 'g:' .. gid, 'p:' .. gid)
redis.call('ZREM', G_PEND, 'g' .. gid)
return {'released', int_s(k)}

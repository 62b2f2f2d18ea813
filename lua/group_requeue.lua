-- group_requeue: undoes a group (a member cancelled at a checkpoint, the
-- commit failed): every ticket of it goes back to its ORIGINAL score (I2,
-- I7 of docs/design.md), except the ones named as leaving, which are
-- removed; a ticket whose presence deadline passed meanwhile is removed too
-- (I6). The group's record goes. Idempotent: a group undone before answers
-- 'gone'.
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1] group id, ARGV[2..] tickets that leave (cancelled)
-- Replies: {'requeued', back, removed} | {'gone'} | {'invalid', what}
gbind(KEYS)
local gid = ARGV[1]
if not valid_id(gid, MAX_ID) then return invalid('group') end
local leaving = {}
for i = 2, #ARGV do
  if not valid_gticket(ARGV[i]) then return invalid('ticket') end
  leaving[ARGV[i]] = true
end
local rec = redis.call('HGET', G_TIX, 'g:' .. gid)
if not rec then return {'gone'} end
local now = now_ms()
local back, removed = 0, 0
for _, id in ipairs(split(rec, ',')) do
  local t = gload(id)
  if t and t.state == 'claimed' and t.group == gid then
    if leaving[id] or t.deadline < now then
      gremove(t)
      removed = removed + 1
    else
      t.state, t.hold, t.group, t.team = 'waiting', 0, '', '0'
      redis.call('HSET', G_TIX, id, gencode(t))
      redis.call('ZADD', G_WAIT, t.score, id)
      redis.call('ZADD', G_DL, int_s(t.deadline), id)
      back = back + 1
    end
  end
end
redis.call('HDEL', G_TIX, 'g:' .. gid, 'p:' .. gid)
redis.call('ZREM', G_PEND, 'g' .. gid)
return {'requeued', int_s(back), int_s(removed)}

-- cluster_user: the node a user's session lives on (user -> node), so that a
-- relay on any node can route the user's match events (docs/cluster.md).
-- KEYS[1] mm:{cluster}:users  hash  user id -> node id
--         (not the five queue keys of lib/common.lua: their names there are
--         just unused aliases)
-- ARGV[1] 'set' | 'unset', ARGV[2] user id, ARGV[3] node id
--   set:   the user's session is on this node now (replaces any other node)
--   unset: the user's session on this node went away: the entry is removed
--          only while it still names this node (compare-and-delete, so a
--          newer session on another node keeps its entry)
-- Replies:
--   {'set'}
--   {'unset'}             removed, or there was no entry
--   {'kept', other_node}  the entry names another node: left alone
--   {'invalid', what}
-- Idempotent.
local k_users = KEYS[1]
local op, user, node = ARGV[1], ARGV[2], ARGV[3]
if type(k_users) ~= 'string' then return invalid('keys') end
if not valid_id(user, MAX_ID) then return invalid('user') end
if not valid_id(node, MAX_NODE) then return invalid('node') end
if op == 'set' then
  redis.call('HSET', k_users, user, node)
  return {'set'}
elseif op == 'unset' then
  local current = redis.call('HGET', k_users, user)
  if current and current ~= node then return {'kept', current} end
  if current then redis.call('HDEL', k_users, user) end
  return {'unset'}
end
return invalid('op')

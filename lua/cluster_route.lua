-- cluster_route: where the sessions of some users live, for a node that has
-- no session of theirs and must route their match events (docs/cluster.md).
-- Reads only.
-- KEYS[1] mm:{cluster}:users  hash  user id -> node id
-- KEYS[2] mm:{cluster}:nodes  hash  node id -> "host:port"
-- KEYS[3] mm:{cluster}:beats  zset  node id -> heartbeat deadline (ms)
--         (not the five queue keys of lib/common.lua: their names there are
--         just unused aliases)
-- ARGV[1..n] user ids (1..100 of them)
-- Replies:
--   {'route', node, address, live, node, address, live, ...}  three fields
--       per user, in ARGV order: the user's node ('' when it has none), that
--       node's address ('' when none is recorded) and '1' when that node's
--       heartbeat deadline has not passed on the server's clock, else '0'
--   {'invalid', what}
-- Idempotent.
local k_users, k_nodes, k_beats = KEYS[1], KEYS[2], KEYS[3]
if type(k_users) ~= 'string' or type(k_nodes) ~= 'string'
   or type(k_beats) ~= 'string' then
  return invalid('keys')
end
if #ARGV < 1 or #ARGV > 100 then return invalid('users') end
for i = 1, #ARGV do
  if not valid_id(ARGV[i], MAX_ID) then return invalid('user') end
end
local now = now_ms()
local out = {'route'}
for i = 1, #ARGV do
  local node = redis.call('HGET', k_users, ARGV[i])
  local addr, live = '', '0'
  if node then
    addr = redis.call('HGET', k_nodes, node) or ''
    local deadline = redis.call('ZSCORE', k_beats, node)
    if deadline and tonumber(deadline) >= now then live = '1' end
  else
    node = ''
  end
  out[#out + 1] = node
  out[#out + 1] = addr
  out[#out + 1] = live
end
return out

-- cluster_beat: one membership heartbeat of a node (docs/cluster.md). Records
-- the node's address with a deadline on the server's clock (problem 7 of docs/design.md: never
-- a node's), drops the records of nodes whose deadline has passed, and
-- answers every live member. Nodes call it every `heartbeat_ms`.
-- KEYS[1] mm:{cluster}:nodes  hash  node id -> "host:port"
-- KEYS[2] mm:{cluster}:beats  zset  node id -> heartbeat deadline (ms)
--         (not the five queue keys of lib/common.lua: their names there are
--         just unused aliases)
-- ARGV[1] node id, ARGV[2] address "host:port", ARGV[3] ttl ms (1..3600000)
-- Replies:
--   {'members', node, address, node, address, ...}  every live node, this
--       one included, in deadline order
--   {'joined', node, address, ...}  the same, when this node had no record
--       before this beat: its first beat, or the store forgot it (a Redis
--       restarted empty, a failover that lost writes) or it lapsed. The
--       node then writes again what else it keeps in the store (its users'
--       entries in mm:{cluster}:users).
--   {'invalid', what}
-- Idempotent: a repeat only moves this node's deadline (and answers
-- 'members').
local k_nodes, k_beats = KEYS[1], KEYS[2]
local node, address = ARGV[1], ARGV[2]
if type(k_nodes) ~= 'string' or type(k_beats) ~= 'string' then
  return invalid('keys')
end
if not valid_id(node, MAX_NODE) then return invalid('node') end
if type(address) ~= 'string' or #address == 0 or #address > 300 then
  return invalid('address')
end
local ttl = int_arg(ARGV[3], 1, MAX_TTL)
if not ttl then return invalid('ttl') end

local now = now_ms()
redis.call('HSET', k_nodes, node, address)
local added = redis.call('ZADD', k_beats, num(now + ttl), node)
-- Lapsed: deadline before now. Their nodes stopped beating (or left).
local lapsed = redis.call('ZRANGEBYSCORE', k_beats, '-inf', '(' .. num(now))
for _, id in ipairs(lapsed) do
  redis.call('ZREM', k_beats, id)
  redis.call('HDEL', k_nodes, id)
end
local out = {added == 1 and 'joined' or 'members'}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', k_beats, num(now), '+inf')) do
  local addr = redis.call('HGET', k_nodes, id)
  if addr then
    out[#out + 1] = id
    out[#out + 1] = addr
  end
end
return out

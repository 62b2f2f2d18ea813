-- depth_lease: which node exports a shared queue's depth (docs/matchd.md,
-- "Metrics"). Every node that knows the queue asks about once a second; the
-- holder's ask renews the lease, anyone's ask takes it when it is free, so
-- exactly one node reports each queue and a cluster-wide sum() is right. A
-- holder that stops asking (it died, or forgot the queue) loses the lease
-- after `ttl` on the server's clock (problem 7 of docs/design.md).
-- KEYS[1] mm:{q}:reporter  string  node id, with a TTL (the queue's hash tag:
--         one Redis Cluster slot with the queue; not the five queue keys of
--         lib/common.lua: their names there are just unused aliases)
-- ARGV[1] node id, ARGV[2] ttl ms (1..3600000)
-- Replies:
--   {'held'}              this node holds the lease for ttl from now
--   {'taken', node}       another node holds it
--   {'invalid', what}
-- Idempotent: a repeat by the holder only moves the expiry.
local key, node = KEYS[1], ARGV[1]
if type(key) ~= 'string' or #key == 0 then return invalid('key') end
if not valid_id(node, MAX_NODE) then return invalid('node') end
local ttl = int_arg(ARGV[2], 1, MAX_TTL)
if not ttl then return invalid('ttl') end
local holder = redis.call('GET', key)
if holder and holder ~= node then return {'taken', holder} end
redis.call('SET', key, node, 'PX', num(ttl))
return {'held'}

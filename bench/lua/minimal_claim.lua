-- minimal_claim.lua: the floor's claim (docs/benchmarks.md "The claim
-- script's cost"): the least a correct claim does in one atomic step. It pops
-- the oldest waiter and takes it when it is still live, or files the caller;
-- a user waits at most once. No claim hold (a crash between claim and commit
-- loses the pair), no attributes, no tokens, no rules, no idempotent retry.
-- KEYS[1] waiting zset (user by FIFO score), KEYS[2] sequence,
-- KEYS[3] hash user -> presence deadline (ms)
-- ARGV[1] user, ARGV[2] ttl ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mine = redis.call('HGET', KEYS[3], ARGV[1])
if mine and tonumber(mine) > now then return {'duplicate'} end
while true do
  local head = redis.call('ZPOPMIN', KEYS[1])
  if not head[1] then break end
  local deadline = redis.call('HGET', KEYS[3], head[1])
  redis.call('HDEL', KEYS[3], head[1])
  if deadline and tonumber(deadline) > now then
    return {'matched', head[1]}
  end
end
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], now + tonumber(ARGV[2]))
return {'queued'}

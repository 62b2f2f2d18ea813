-- unlock: compare-and-delete of a pair lock (problem 6 of docs/design.md,
-- actors/pair_lock.hpp). The lock is taken with SET key token NX PX lease;
-- only the holder's token frees it, so a holder whose lease lapsed never
-- frees the lock of the one after it (problem 8).
-- Idempotent: once the key is gone or another token holds it, the answer is
-- 'not_owner' and nothing changes.
-- KEYS[1] the pair's lock key, prefix .. '{' .. min(a,b) .. ':' .. max(a,b) .. '}'
--         (ONE key, not the five queue keys of lib/common.lua: their names
--         there are just unused aliases)
-- ARGV[1] token (from the acquire)
-- Replies:
--   {'released'}
--   {'not_owner'}      the key is gone or holds another token
--   {'invalid', what}
local key, token = KEYS[1], ARGV[1]
if type(key) ~= 'string' or #key == 0 then return invalid('key') end
if type(token) ~= 'string' or #token == 0 or #token > MAX_ID then
  return invalid('token')
end
if redis.call('GET', key) ~= token then return {'not_owner'} end
redis.call('DEL', key)
return {'released'}

-- rescan: the heartbeats of many waiting tickets of one queue in one call
-- (docs/engine.md, "Heartbeats"). Each ticket runs exactly as claim with
-- rescan '1' (problems 3, 4 of docs/design.md: its presence deadline
-- refreshed, a live waiter beside it claimed), one after the other in the
-- order given, with no other command in between. One call instead of one
-- per ticket saves the caller and Redis a command's framing and dispatch
-- each. op_claim is the library's claim (lua/claim.lua, defined before this
-- file: cmake/embed_scripts.cmake takes the files in name order).
-- KEYS: the queue keys, as for claim.
-- ARGV[1] hold ms (as claim's ARGV[7]), then per ticket 9 values:
--   user, ticket, node, attributes, ttl ms, scan, rules, rule values, avoid
--   (as claim's ARGV[1..6] and ARGV[9..11]; rules '' = FIFO)
-- at most MAX_RESCANS tickets.
-- Replies:
--   {'each', reply 1, reply 2, ...}  one claim reply per ticket, in order;
--       a ticket whose claim raised an error answers {'error', message}
--       and the others run on (a failing command keeps what it changed
--       before, as it would in a call of its own)
--   {'invalid', what}                for the call as a whole: nothing changed
local MAX_RESCANS = 100
local n = (#ARGV - 1) / 9
if n < 1 or n > MAX_RESCANS or n ~= math.floor(n) then
  return invalid('tickets')
end
local hold = ARGV[1]
if not int_arg(hold, 1, MAX_HOLD) then return invalid('hold') end
local out = {'each'}
for i = 0, n - 1 do
  local b = 1 + i * 9
  local ok, r = pcall(op_claim, KEYS,
                      {ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4],
                       ARGV[b + 5], ARGV[b + 6], hold, '1', ARGV[b + 7],
                       ARGV[b + 8], ARGV[b + 9]})
  if ok then
    out[i + 2] = r
  else
    if type(r) == 'table' then r = r.err end
    out[i + 2] = {'error', tostring(r)}
  end
end
return out

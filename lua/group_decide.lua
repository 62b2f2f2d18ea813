-- group_decide: the claimer of proposals asks what became of them (the
-- ready check, problem 16 of docs/design.md): each is decided by the rule
-- of lib/proposals.lua's gdecide, at the store's clock: accepted (the
-- claimer commits it as any group), pending, or settled (tombstones for
-- the decliners and, past the deadline, the silent; every other ticket
-- back at its original score). Idempotent: a settled one answers 'gone'.
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1..] group ids (at most 1000)
-- Replies: {n, then n times: status, k, then k times: ticket, outcome}
--   status 'accepted' | 'pending' | 'settled' | 'gone'
--   outcome 'requeued' | 'declined' | 'timed_out' | 'removed'
--   | {'invalid', what}
gbind(KEYS)
if #ARGV < 1 or #ARGV > MAX_BATCH then return invalid('groups') end
for _, gid in ipairs(ARGV) do
  if not valid_id(gid, MAX_ID) then return invalid('group') end
end
local now = now_ms()
local out = {int_s(#ARGV)}
for _, gid in ipairs(ARGV) do
  local status, pairs_ = gdecide(gid, now, false)
  out[#out + 1] = status
  out[#out + 1] = int_s(#pairs_ / 2)
  for _, x in ipairs(pairs_) do out[#out + 1] = x end
end
return out

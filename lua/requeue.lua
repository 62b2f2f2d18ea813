-- requeue: puts a claimed ticket back at its ORIGINAL score, so a waiter whose
-- claimer cancelled or failed keeps its place (problem 5 of docs/design.md, I2, I7). A ticket
-- whose presence deadline passed meanwhile is removed instead (I6). A claimer
-- whose pair was undone goes back the same way: at the score it had when it
-- claimed (its arrival, or its place in the queue when it claimed on a
-- re-scan), so a retry does not cost it its place (I7).
-- Idempotent: requeueing a waiting ticket answers 'waiting' and does nothing.
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] ticket id
-- Replies:
--   {'requeued', ticket, score}
--   {'waiting', ticket, score}
--   {'stale', ticket}
--   {'gone'}
--   {'invalid', what}
local ticket = ARGV[1]
if not valid_id(ticket, MAX_TICKET) then return invalid('ticket') end
local rec = load_ticket(ticket)
if not rec then return {'gone'} end
if rec.state == 'waiting' then return {'waiting', ticket, rec.score} end
if rec.state ~= 'claimed' and rec.state ~= 'claimer' then
  return invalid('not a claimed ticket')
end
if rec.deadline < now_ms() then
  remove_ticket(rec)
  return {'stale', ticket}
end
make_waiting(rec)
return {'requeued', ticket, rec.score}

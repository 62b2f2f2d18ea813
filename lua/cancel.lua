-- cancel: compare-and-delete by token (problem 8 of docs/design.md). A token that is not the
-- user's current one deletes nothing, so a late cancel never removes a newer
-- ticket. A ticket that is claimed is not removed here: the finalizer owns it
-- now and honours the cancel at its checkpoints (problem 5).
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] user id, ARGV[2] token (from enqueue/claim)
-- Replies:
--   {'cancelled', ticket}
--   {'in_flight', ticket, state, node}   state: claimed | claimer; node: the
--       node whose finalizer owns the pair (claimed: the claimer's node, from
--       the record's p_node; claimer: the ticket's own node). A cancel from
--       another node routes its verdict request there (docs/cluster.md).
--   {'stale_token', ticket}        the user's current ticket has another token
--   {'not_found'}
--   {'invalid', what}
local user, token = ARGV[1], ARGV[2]
if not valid_id(user, MAX_ID) then return invalid('user') end
if type(token) ~= 'string' or not string.find(token, '^%d+$') then
  return invalid('token')
end
local current = pointer_of(user)
if not current then return {'not_found'} end
local rec = load_ticket(current)
if not rec then
  redis.call('HDEL', K_TICKETS, pointer_field(user))
  return {'not_found'}
end
if rec.token ~= token then return {'stale_token', current} end
if rec.state ~= 'waiting' then
  local owner = rec.node
  if rec.state == 'claimed' then owner = rec.p_node end
  return {'in_flight', current, rec.state, owner}
end
remove_ticket(rec)
return {'cancelled', current}

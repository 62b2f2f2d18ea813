-- common.lua: helpers the build prepends to every script in lua/ (Redis
-- scripts cannot share code at run time, so the build does the sharing).
--
-- Every queue script takes the same five KEYS, all under the queue's hash tag
-- so that they live in one Redis Cluster slot:
--   KEYS[1] mm:{q}:waiting    zset  ticket id -> FIFO score (per-queue sequence)
--   KEYS[2] mm:{q}:seq        string counter for scores and tokens
--   KEYS[3] mm:{q}:tickets    hash  ticket id -> encoded ticket record
--   KEYS[4] mm:{q}:users      hash  user id -> its current ticket id
--   KEYS[5] mm:{q}:deadlines  zset  ticket id -> ms (presence deadline while
--                                   waiting, claim hold while claimed)
--   KEYS[6] mm:{q}:index      zset  queues with rules only: every waiting
--                                   ticket under each of its cells, all at
--                                   score 0, read by lex range (rules.lua)
-- Every reply is an array of strings whose first element names the outcome.

local K_WAITING, K_SEQ, K_TICKETS, K_USERS, K_DEADLINES, K_IDX =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- Defined by lib/rules.lua (prepended after this file); no-ops for tickets
-- of queues without rules.
local index_add, index_remove

-- The server's clock, never a node's (problem 7 of docs/design.md).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as plain digits: tostring() would switch to exponent notation.
local function num(x)
  return string.format('%.0f', x)
end

-- A ticket record. since: store time of the join (rules widen with it); rs,
-- rk, avoid: the queue's rules, the ticket's rule values and recent partners
-- (rules.lua); cells: the index cells the ticket is filed under while
-- waiting. NUMERIC fields decode to numbers (0 when empty), the rest to
-- strings ('' when empty).
local NUMERIC = {score = true, deadline = true, hold = true, since = true}

-- The record as one string: '\1', then the fields that never hold a NUL
-- (ids, numbers, rule strings: all checked on the way in) joined by NULs,
-- then the length of attrs, then attrs and p_attrs back to back (they may
-- hold any byte). One table.concat to write and one string.match to read:
-- the per-field loop of the older layout cost ~20 us of Lua each way
-- (docs/benchmarks.md "The claim script's cost").
-- The NUL-free fields, in order: user ticket node score token state deadline
-- hold p_user p_ticket p_node p_score p_token since rs rk avoid cells; then
-- the length of attrs.
-- LAYOUT: '^\1', 19 times '([^%z]*)%z', '(.*)$' (written out: building it
-- with string.rep on every call cost a microsecond).
local LAYOUT = '^\1([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z'
  .. '([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z'
  .. '([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z'
  .. '([^%z]*)%z([^%z]*)%z(.*)$'

local function str(v)
  if v == nil then return '' end
  return v
end

local function encode(r)
  local a = str(r.attrs)
  return table.concat({'\1' .. r.user, r.ticket, r.node, num(r.score),
    str(r.token), str(r.state), num(r.deadline or 0), num(r.hold or 0),
    str(r.p_user), str(r.p_ticket), str(r.p_node), str(r.p_score),
    str(r.p_token), num(r.since or 0), str(r.rs), str(r.rk), str(r.avoid),
    str(r.cells), #a, a .. str(r.p_attrs)}, '\0')
end

-- The layout before this one: every field length-prefixed. Records written
-- by an older build are still read (a rolling upgrade); the field list is
-- built only then (tables made at the top cost every call of every script).
local function decode_old(s)
  local rec, pos = {}, 1
  for _, f in ipairs({'user', 'ticket', 'node', 'attrs', 'score', 'token',
                      'state', 'deadline', 'hold', 'p_user', 'p_ticket',
                      'p_node', 'p_attrs', 'p_score', 'p_token', 'since',
                      'rs', 'rk', 'avoid', 'cells'}) do
    local colon = string.find(s, ':', pos, true)
    local v = ''
    if colon then -- a record of an even older layout lacks the newer fields
      local n = tonumber(string.sub(s, pos, colon - 1))
      v = string.sub(s, colon + 1, colon + n)
      pos = colon + n + 1
    end
    if NUMERIC[f] then v = tonumber(v) or 0 end
    rec[f] = v
  end
  return rec
end

local function decode(s)
  if not s then return nil end
  if string.byte(s, 1) ~= 1 then return decode_old(s) end
  local u, t, n, sc, tok, st, dl, h, pu, pt, pn, ps, ptk, si, rs, rk, av, ce,
        al, rest = string.match(s, LAYOUT)
  if not u then return nil end -- not a record: treated as gone
  al = tonumber(al) or 0
  return {user = u, ticket = t, node = n, score = tonumber(sc) or 0,
          token = tok, state = st, deadline = tonumber(dl) or 0,
          hold = tonumber(h) or 0, p_user = pu, p_ticket = pt, p_node = pn,
          p_score = ps, p_token = ptk, since = tonumber(si) or 0, rs = rs,
          rk = rk, avoid = av, cells = ce, attrs = string.sub(rest, 1, al),
          p_attrs = string.sub(rest, al + 1)}
end

local function load_ticket(id)
  return decode(redis.call('HGET', K_TICKETS, id))
end

local function store_ticket(rec)
  redis.call('HSET', K_TICKETS, rec.ticket, encode(rec))
end

-- Removes every trace of a ticket; the user's pointer only if it is still ours.
local function remove_ticket(rec)
  index_remove(rec)
  redis.call('ZREM', K_WAITING, rec.ticket)
  redis.call('ZREM', K_DEADLINES, rec.ticket)
  redis.call('HDEL', K_TICKETS, rec.ticket)
  if redis.call('HGET', K_USERS, rec.user) == rec.ticket then
    redis.call('HDEL', K_USERS, rec.user)
  end
end

-- Puts a ticket (back) into the waiting set at its score.
local function make_waiting(rec, now)
  rec.state = 'waiting'
  rec.hold, rec.p_user, rec.p_ticket, rec.p_node = 0, '', '', ''
  rec.p_attrs, rec.p_score, rec.p_token = '', '', ''
  index_remove(rec)
  index_add(rec, now or now_ms())
  store_ticket(rec)
  redis.call('HSET', K_USERS, rec.user, rec.ticket)
  redis.call('ZADD', K_WAITING, rec.score, rec.ticket)
  redis.call('ZADD', K_DEADLINES, rec.deadline, rec.ticket)
end

-- Argument checks; a refusal changes nothing.
local function valid_id(s, max)
  return type(s) == 'string' and #s > 0 and #s <= max
    and string.find(s, '^[%w%._:@%-]+$') ~= nil
end

local function int_arg(s, lo, hi)
  if type(s) ~= 'string' or not string.find(s, '^%d+$') then return nil end
  local n = tonumber(s)
  if n < lo or n > hi then return nil end
  return n
end

-- Tickets are longer than other ids: a session files <nonce>.<heal>:<len>:
-- <user>:<client ticket> (core/ticket_id.hpp).
local MAX_ID, MAX_TICKET, MAX_NODE, MAX_ATTRS = 128, 300, 64, 4096
local MAX_TTL, MAX_SCAN, MAX_HOLD, MAX_BATCH = 3600000, 100, 600000, 1000

local function invalid(what)
  return {'invalid', what}
end

-- ARGV[1..5] of enqueue and claim: user, ticket, node, attributes, ttl ms.
-- Returns them checked, or nil and the refusal to answer.
local function ticket_args()
  local a = {user = ARGV[1], ticket = ARGV[2], node = ARGV[3], attrs = ARGV[4]}
  if not valid_id(a.user, MAX_ID) then return nil, invalid('user') end
  if not valid_id(a.ticket, MAX_TICKET) then return nil, invalid('ticket') end
  if not valid_id(a.node, MAX_NODE) then return nil, invalid('node') end
  if type(a.attrs) ~= 'string' or #a.attrs > MAX_ATTRS then
    return nil, invalid('attrs')
  end
  a.ttl = int_arg(ARGV[5], 1, MAX_TTL)
  if not a.ttl then return nil, invalid('ttl') end
  return a
end

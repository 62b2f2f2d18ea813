-- common.lua: what every operation of the library shares. The build makes
-- ONE Redis function library of lua/ (cmake/embed_scripts.cmake): this file,
-- then lib/rules.lua, then each operation's file as the body of a function
-- `(KEYS, ARGV)`, registered as `mm_<operation>_<build hash>`. Redis compiles
-- the library once (FUNCTION LOAD), so nothing here runs per call but the
-- functions an operation calls (docs/queue.md "One library").
--
-- Every queue operation takes the same five KEYS, all under the queue's
-- hash tag so that they live in one Redis Cluster slot:
--   KEYS[1] mm:{q}:waiting    zset  ticket id -> FIFO score (per-queue sequence)
--   KEYS[2] mm:{q}:seq        string counter for scores and tokens
--   KEYS[3] mm:{q}:tickets    hash  ticket id -> encoded ticket record, and
--                                   '#' .. user id -> the user's current
--                                   ticket id (its pointer)
--   KEYS[4] mm:{q}:users      hash  the pointers of the build before (read
--                                   only where a record has none: see
--                                   pointer_of below)
--   KEYS[5] mm:{q}:deadlines  zset  ticket id -> ms (presence deadline while
--                                   waiting, claim hold while claimed)
--   KEYS[6] mm:{q}:index      zset  queues with rules only: every waiting
--                                   ticket under each of its cells, all at
--                                   score 0, read by lex range (rules.lua)
-- Every reply is an array of strings whose first element names the outcome.

-- The keys of the running call: set by bind() before every operation (a
-- function runs alone, so one set of upvalues serves all).
local K_WAITING, K_SEQ, K_TICKETS, K_USERS, K_DEADLINES, K_IDX

local function bind(keys)
  K_WAITING, K_SEQ, K_TICKETS, K_USERS, K_DEADLINES, K_IDX =
    keys[1], keys[2], keys[3], keys[4], keys[5], keys[6]
end

-- Defined by lib/rules.lua (after this file); no-ops for tickets of queues
-- without rules.
local index_add, index_remove

-- The server's clock, never a node's (problem 7 of docs/design.md).
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- Numbers as plain digits: tostring() would switch to exponent notation.
-- Every conversion costs a sprintf (~0.45 us for '%.0f', half of it for
-- '%d'): numbers read from a record stay the strings they were where
-- nothing compares them, and integers take int_s.
local function num(x)
  return string.format('%.0f', x)
end

-- An integer (a counter, a time in ms: far below 2^53) as digits.
local function int_s(x)
  return string.format('%d', x)
end

-- A ticket record. since: store time of the join (rules widen with it); rs,
-- rk, avoid: the queue's rules, the ticket's rule values and recent partners
-- (rules.lua); cells: the index cells the ticket is filed under while
-- waiting. deadline and hold decode to numbers (they are compared), score,
-- since and p_score stay digit strings (Lua's arithmetic takes them as they
-- are); the rest are strings ('' when empty). dl_s and hold_s keep the
-- digits read, so that a field nobody changed is written back without a
-- conversion (digits() checks that they still say the same).
--
-- The record as one string: '\1', then the fields that never hold a NUL
-- (ids, numbers, rule strings: all checked on the way in) joined by NULs,
-- then the length of attrs, then attrs and p_attrs back to back (they may
-- hold any byte). One concatenation to write and one string.match to read.
-- The NUL-free fields, in order: user ticket node score token state deadline
-- hold p_user p_ticket p_node p_score p_token since rs rk avoid cells; then
-- the length of attrs.
-- LAYOUT: '^\1', 19 times '([^%z]*)%z', '(.*)$' (written out: building it
-- with string.rep on every call cost a microsecond).
local LAYOUT = '^\1([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z'
  .. '([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z'
  .. '([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z'
  .. '([^%z]*)%z([^%z]*)%z(.*)$'

-- A number field as digits: the digits it was read with while unchanged.
local function digits(v, read)
  if read and read ~= '' and tonumber(read) == v then return read end
  return int_s(v or 0)
end

local function encode(r)
  local a = r.attrs or ''
  return '\1' .. r.user .. '\0' .. r.ticket .. '\0' .. r.node .. '\0'
    .. r.score .. '\0' .. (r.token or '') .. '\0' .. (r.state or '') .. '\0'
    .. digits(r.deadline, r.dl_s) .. '\0' .. digits(r.hold, r.hold_s) .. '\0'
    .. (r.p_user or '') .. '\0' .. (r.p_ticket or '') .. '\0'
    .. (r.p_node or '') .. '\0' .. (r.p_score or '') .. '\0'
    .. (r.p_token or '') .. '\0' .. (r.since or '0') .. '\0'
    .. (r.rs or '') .. '\0' .. (r.rk or '') .. '\0' .. (r.avoid or '')
    .. '\0' .. (r.cells or '') .. '\0' .. #a .. '\0' .. a
    .. (r.p_attrs or '')
end

-- The layout before this one: every field length-prefixed. Records written
-- by an older build are still read (a rolling upgrade); the field list is
-- built only then.
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
    rec[f] = v
  end
  rec.deadline, rec.hold = tonumber(rec.deadline) or 0, tonumber(rec.hold) or 0
  if rec.score == '' then rec.score = '0' end
  if rec.since == '' then rec.since = '0' end
  return rec
end

local function decode(s)
  if not s then return nil end
  if string.byte(s, 1) ~= 1 then return decode_old(s) end
  local u, t, n, sc, tok, st, dl, h, pu, pt, pn, ps, ptk, si, rs, rk, av, ce,
        al, rest = string.match(s, LAYOUT)
  if not u then return nil end -- not a record: treated as gone
  al = tonumber(al) or 0
  if sc == '' then sc = '0' end
  if si == '' then si = '0' end
  return {user = u, ticket = t, node = n, score = sc, token = tok, state = st,
          deadline = tonumber(dl) or 0, dl_s = dl, hold = tonumber(h) or 0,
          hold_s = h, p_user = pu, p_ticket = pt, p_node = pn, p_score = ps,
          p_token = ptk, since = si, rs = rs, rk = rk, avoid = av, cells = ce,
          attrs = string.sub(rest, 1, al), p_attrs = string.sub(rest, al + 1)}
end

local function load_ticket(id)
  return decode(redis.call('HGET', K_TICKETS, id))
end

local function store_ticket(rec)
  redis.call('HSET', K_TICKETS, rec.ticket, encode(rec))
end

-- A user's pointer to its current ticket is a field of the tickets hash,
-- '#' .. user ('#' starts no ticket id), so that one call reads it with a
-- record and one call writes both. The build before kept pointers in
-- mm:{q}:users (KEYS[4]): one found there (only looked for where this one
-- is missing) moves here.
local function pointer_field(user)
  return '#' .. user
end

local function old_pointer(user)
  if not K_USERS then return nil end
  local cur = redis.call('HGET', K_USERS, user)
  if not cur then return nil end
  redis.call('HDEL', K_USERS, user)
  redis.call('HSET', K_TICKETS, pointer_field(user), cur)
  return cur
end

-- The user's current ticket id (or nil).
local function pointer_of(user)
  return redis.call('HGET', K_TICKETS, pointer_field(user)) or old_pointer(user)
end

-- The user's current ticket id and the raw record of ticket id `ticket`
-- (each or nil), in one call.
local function pointer_and_record(user, ticket)
  local got = redis.call('HMGET', K_TICKETS, pointer_field(user), ticket)
  local cur, raw = got[1] or nil, got[2] or nil
  if not cur and raw then cur = old_pointer(user) end
  return cur, raw
end

-- Removes every trace of a ticket; the user's pointer only if it is still
-- ours. `popped`: the ticket already left the waiting set (or was never in
-- it: claimed and claiming tickets).
local function remove_ticket(rec, popped)
  index_remove(rec)
  if not popped then redis.call('ZREM', K_WAITING, rec.ticket) end
  redis.call('ZREM', K_DEADLINES, rec.ticket)
  local ptr = pointer_field(rec.user)
  if redis.call('HGET', K_TICKETS, ptr) == rec.ticket then
    redis.call('HDEL', K_TICKETS, rec.ticket, ptr)
  else
    redis.call('HDEL', K_TICKETS, rec.ticket)
  end
end

-- Puts a ticket (back) into the waiting set at its score, the user's
-- pointer on it.
local function make_waiting(rec, now)
  rec.state = 'waiting'
  rec.hold, rec.hold_s, rec.p_user, rec.p_ticket, rec.p_node = 0, '0', '', '',
    ''
  rec.p_attrs, rec.p_score, rec.p_token = '', '', ''
  index_remove(rec)
  index_add(rec, now or now_ms())
  redis.call('HSET', K_TICKETS, rec.ticket, encode(rec),
             pointer_field(rec.user), rec.ticket)
  redis.call('ZADD', K_WAITING, rec.score, rec.ticket)
  redis.call('ZADD', K_DEADLINES, digits(rec.deadline, rec.dl_s), rec.ticket)
end

-- Argument checks; a refusal changes nothing.
local function valid_id(s, max)
  return type(s) == 'string' and #s > 0 and #s <= max
    and not string.find(s, '[^%w%._:@%-]')
end

local function int_arg(s, lo, hi)
  if type(s) ~= 'string' or string.find(s, '[^%d]') or s == '' then
    return nil
  end
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
-- Returns them checked (ttl as a number), or nil and the refusal.
local function ticket_args(ARGV)
  local user, ticket, node, attrs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  if not valid_id(user, MAX_ID) then return nil, invalid('user') end
  if not valid_id(ticket, MAX_TICKET) then return nil, invalid('ticket') end
  if not valid_id(node, MAX_NODE) then return nil, invalid('node') end
  if type(attrs) ~= 'string' or #attrs > MAX_ATTRS then
    return nil, invalid('attrs')
  end
  local ttl = int_arg(ARGV[5], 1, MAX_TTL)
  if not ttl then return nil, invalid('ttl') end
  return user, ticket, node, attrs, ttl
end

-- ARGV[k..k+2] of enqueue (6) and claim (9): rules, rule values, avoid.
-- Returns them, or nil and the refusal.
local function rule_args(ARGV, k)
  local rs, rk, avoid = ARGV[k] or '', ARGV[k + 1] or '', ARGV[k + 2] or ''
  if rs == '' and rk == '' and avoid == '' then return rs, rk, avoid end
  if #rs > 1024 or #rk > 2048 or #avoid > 4096 or string.find(rs, '%z')
      or string.find(rk, '%z') or string.find(avoid, '%z') then
    return nil, invalid('rules') -- a NUL would break the record
  end
  if rs ~= '' and (not K_IDX or not string.find(rk, '^[%w%._@%-|,+]*$')) then
    return nil, invalid('rules')
  end
  return rs, rk, avoid
end

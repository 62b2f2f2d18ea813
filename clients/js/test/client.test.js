// The JavaScript client against a real matchd: one it starts on the
// embedded stores, or MATCHD_URL's when set up as test/matchd.js says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket as WsSocket } from 'ws';

import { MatchmakerClient, MatchmakerError, backoffDelay } from '../src/index.js';
import { token, uniqueUser, url } from './support.js';

function client(name, opts = {}) {
  const user = uniqueUser(name);
  return new MatchmakerClient({ url, user, token: token(user), ...opts });
}

const isMatch = (session) => (ev) => ev.type === 'match.created' && (!session || ev.session_id === session);
const isEnded = (session) => (ev) => ev.type === 'session.ended' && ev.session_id === session;

test('join, match, end, and join again', async () => {
  const alice = client('alice');
  const bob = client('bob');
  const seenA = [];
  const sa = alice.events({ onEvent: (ev) => seenA.push(ev) });
  const sb = bob.events();
  try {
    await Promise.all([sa.opened(), sb.opened()]);
    const ja = await alice.join('default', { ticket: 't-1' });
    assert.equal(ja.state, 'queued');
    assert.equal(ja.ticket, 't-1');
    const jb = await bob.join('default', { ticket: 't-9' });
    assert.ok(['claiming', 'finalizing', 'matched'].includes(jb.state), jb.state);
    const [ma, mb] = await Promise.all([sa.next(isMatch()), sb.next(isMatch())]);
    assert.equal(ma.session_id, mb.session_id);
    assert.deepEqual([...ma.users].sort(), [alice.user, bob.user].sort());
    // A user in a session never waits in a queue.
    await assert.rejects(bob.join('default', { ticket: 't-10' }), (err) => {
      assert.ok(err instanceof MatchmakerError);
      assert.equal(err.status, 409);
      assert.equal(err.code, 'in_session');
      assert.equal(err.body.session_id, ma.session_id);
      return true;
    });
    const end = await alice.endSession(ma.session_id, 'hung up');
    assert.equal(end.state, 'ended');
    assert.equal(end.ended_now, true);
    assert.equal(end.ended_by, alice.user);
    const again = await bob.endSession(ma.session_id);
    assert.equal(again.ended_now, false);
    const [ea, eb] = await Promise.all([sa.next(isEnded(ma.session_id)), sb.next(isEnded(ma.session_id))]);
    assert.equal(ea.reason, 'hung up');
    assert.equal(eb.ended_by, alice.user);
    // Both are free at once: they are matched again, in a new session.
    await bob.join('default', { ticket: 't-11' });
    await alice.join('default', { ticket: 't-2' });
    const [m2a, m2b] = await Promise.all([sa.next(isMatch()), sb.next(isMatch())]);
    assert.equal(m2a.session_id, m2b.session_id);
    assert.notEqual(m2a.session_id, ma.session_id);
    await bob.endSession(m2a.session_id);
    await sa.next(isEnded(m2a.session_id));
    // What the application saw: four events, each once.
    assert.deepEqual(seenA.map((e) => e.type), ['match.created', 'session.ended', 'match.created', 'session.ended']);
    assert.equal(new Set(seenA.map((e) => e.event_id)).size, 4);
  } finally {
    sa.close();
    sb.close();
  }
});

test('cancel, heartbeat, ticket state', async () => {
  const carol = client('carol');
  const t = await carol.join('default', { ticket: 't-3' });
  assert.equal(t.state, 'queued');
  assert.equal((await carol.heartbeat('t-3')).state, 'queued');
  assert.equal((await carol.cancel('t-3')).state, 'cancelled');
  assert.equal((await carol.ticket('t-3')).state, 'cancelled');
  // Idempotent.
  assert.equal((await carol.cancel('t-3')).state, 'cancelled');
});

test('a mutual like matches both users', async () => {
  const dave = client('dave');
  const erin = client('erin');
  const sd = dave.events();
  try {
    await sd.opened();
    assert.equal((await dave.swipe(erin.user, 'LIKE')).mutual, false);
    const r = await erin.swipe(dave.user, 'LIKE');
    assert.equal(r.mutual, true);
    assert.ok(r.session_id);
    const ev = await sd.next(isMatch(r.session_id));
    assert.deepEqual([...ev.users].sort(), [dave.user, erin.user].sort());
  } finally {
    sd.close();
  }
});

test('refusals are MatchmakerErrors with the API error name', async () => {
  const user = uniqueUser('mallory');
  const forged = new MatchmakerClient({ url, user, token: token(user).slice(0, -4) + 'AAAA' });
  await assert.rejects(forged.join('default'), { status: 401, code: 'bad_signature' });
  const ok = client('oscar');
  await assert.rejects(ok.join('no-such-queue'), { status: 404, code: 'unknown_queue' });
  assert.throws(() => ok.join('bad queue'), TypeError);
});

test('reconnects after the server closes the socket; events missed meanwhile arrive once', async () => {
  const frank = client('frank', { backoff: { initialMs: 800, jitter: 0 } });
  const grace = client('grace');
  const seen = [];
  const closes = [];
  const sf = frank.events({ onEvent: (ev) => seen.push(ev), onClose: (c) => closes.push(c) });
  try {
    await sf.opened();
    assert.equal(sf.opens, 1);
    await frank.join('default', { ticket: 'f-1' });
    // More than --ws-rate messages (burst twice that): matchd closes the
    // WebSocket with 1008 (policy violation).
    for (let i = 0; i < 60; i++) sf._ws.send('flood');
    const deadline = Date.now() + 5000;
    while (closes.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(closes.length, 1, 'the server closed the socket');
    assert.equal(closes[0].code, 1008);
    assert.equal(closes[0].willRetry, true);
    assert.equal(sf.connected, false);
    // Matched while frank has no WebSocket: the node keeps the event.
    await grace.join('default', { ticket: 'g-1' });
    const ev = await sf.next(isMatch(), { timeoutMs: 8000 });
    assert.equal(sf.opens, 2, 'reconnected once');
    assert.ok(ev.users.includes(grace.user));
    await grace.endSession(ev.session_id);
    await sf.next(isEnded(ev.session_id));
    assert.deepEqual(seen.map((e) => e.type), ['match.created', 'session.ended']);
  } finally {
    sf.close();
  }
});

/** A WebSocket (the `ws` package) that hands every message over twice, as an
 *  at-least-once delivery may. */
class TwiceWebSocket extends WsSocket {
  set onmessage(fn) {
    super.onmessage = (msg) => {
      fn(msg);
      fn(msg);
    };
  }
}

test('no duplicate event reaches the application', async () => {
  const heidi = client('heidi', { WebSocket: TwiceWebSocket });
  const ivan = client('ivan');
  const seen = [];
  const sh = heidi.events({ onEvent: (ev) => seen.push(ev) });
  try {
    await sh.opened();
    await heidi.join('default');
    await ivan.join('default');
    const m = await sh.next(isMatch());
    await ivan.endSession(m.session_id);
    await sh.next(isEnded(m.session_id));
    await new Promise((r) => setTimeout(r, 100)); // a late copy would land here
    assert.deepEqual(seen.map((e) => e.type), ['match.created', 'session.ended']);
    assert.equal(sh.duplicates, 2);
  } finally {
    sh.close();
  }
});

test('closed streams stay closed', async () => {
  const judy = client('judy');
  const s = judy.events();
  await s.opened();
  s.close();
  await new Promise((r) => setTimeout(r, 600));
  assert.equal(s.opens, 1);
  assert.equal(s.connected, false);
});

test('backoff grows by the factor up to the cap, with bounded jitter', () => {
  const b = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.2 };
  assert.equal(backoffDelay(0, b, () => 0.5), 100);
  assert.equal(backoffDelay(3, b, () => 0.5), 800);
  assert.equal(backoffDelay(10, b, () => 0.5), 1000);
  assert.equal(backoffDelay(0, b, () => 0), 80);
  assert.equal(backoffDelay(0, b, () => 1), 120);
});

test('a party and a user alone make a lobby of three; a member leaves', async () => {
  const ann = client('ann');
  const bob = client('bob');
  const cid = client('cid');
  const [sa, sb, sc] = [ann.events(), bob.events(), cid.events()];
  try {
    await Promise.all([sa.opened(), sb.opened(), sc.opened()]);
    const made = await ann.createParty();
    assert.equal(made.leader, ann.user);
    await assert.rejects(bob.joinParty(made.party, 'wrong-code'), (err) => err.status === 403);
    const joined = await bob.joinParty(made.party, made.code);
    assert.deepEqual(joined.members, [ann.user, bob.user]);
    const updated = await sb.next((ev) => ev.type === 'party.updated' && ev.members.length === 2);
    assert.equal(updated.party, made.party);
    const queued = await ann.queueParty(made.party, 'trio', { ticket: 'pt-1' });
    assert.equal(queued.phase, 'queued');
    const alone = await cid.join('trio', { ticket: 'c-1' });
    assert.ok(['claiming', 'queued', 'finalizing', 'matched'].includes(alone.state), alone.state);
    const [ma, mb, mc] = await Promise.all([sa.next(isMatch()), sb.next(isMatch()), sc.next(isMatch())]);
    assert.equal(ma.session_id, mb.session_id);
    assert.equal(ma.session_id, mc.session_id);
    assert.deepEqual([...ma.users].sort(), [ann.user, bob.user, cid.user].sort());
    assert.equal((await bob.party(made.party)).phase, 'matched');
    const left = await cid.leaveSession(ma.session_id, 'bye');
    assert.equal(left.left_now, true);
    assert.equal(left.remaining, 2);
    const gone = await sa.next((ev) => ev.type === 'session.member_left');
    assert.equal(gone.user, cid.user);
    assert.equal(gone.remaining, 2);
    // A member asks for a player for the seat; a stranger may not; the
    // next user to queue fills it and every member hears it.
    const asked = await ann.requestBackfill(ma.session_id);
    assert.equal(asked.state, 'waiting');
    assert.equal(asked.players, 2);
    assert.equal(asked.max_players, 3);
    await assert.rejects(client('eve').requestBackfill(ma.session_id), (err) => err.status === 403);
    const dee = client('dee');
    await dee.join('trio', { ticket: 'd-1' });
    const filled = await sa.next((ev) => ev.type === 'session.members_changed');
    assert.equal(filled.session_id, ma.session_id);
    assert.deepEqual(filled.added.map((a) => a.user), [dee.user]);
    assert.equal(filled.remaining, 3);
  } finally {
    sa.close();
    sb.close();
    sc.close();
  }
});

test('a ready check: both accept a proposed pair and it is made', async () => {
  const ann = client('ann');
  const bob = client('bob');
  const [sa, sb] = [ann.events(), bob.events()];
  try {
    await Promise.all([sa.opened(), sb.opened()]);
    await ann.join('ready', { ticket: 'r-1' });
    await bob.join('ready', { ticket: 'r-2' });
    const isProposal = (ev) => ev.type === 'match.proposed';
    const [pa, pb] = await Promise.all([sa.next(isProposal), sb.next(isProposal)]);
    assert.equal(pa.proposal, pb.proposal);
    assert.ok(pa.deadline_ms > Date.now() - 60000);
    const first = await ann.acceptProposal(pa.proposal, pa.queue);
    assert.equal(first.answer, 'accept');
    await assert.rejects(client('eve').acceptProposal(pa.proposal, pa.queue), (err) => err.status === 403);
    const last = await bob.acceptProposal(pb.proposal, pb.queue);
    assert.equal(last.complete, true);
    const [ma, mb] = await Promise.all([sa.next(isMatch()), sb.next(isMatch())]);
    assert.equal(ma.session_id, mb.session_id);
  } finally {
    sa.close();
    sb.close();
  }
});

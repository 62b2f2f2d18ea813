// The "try it" page: asks matchd for a demo user (POST /v1/console/demo,
// only when the node runs with --demo-queue), opens that user's event
// stream with the JavaScript client (matchmaker.js, clients/js/), joins the
// demo queue, shows the match.created event when it arrives, and ends the
// session.

import { MatchmakerClient, MatchmakerError, newTicketId } from './matchmaker.js';

const $ = (id) => document.getElementById(id);
let client = null;
let stream = null;
let ticket = null;
let session = null;

function log(line) {
  const el = $('log');
  el.textContent += `${new Date().toISOString().slice(11, 23)} ${line}\n`;
  el.scrollTop = el.scrollHeight;
}

function setState(state) {
  $('state').textContent = state;
  $('state').className = 'state-' + state;
  document.body.dataset.state = state;
  const waiting = state === 'queued' || state === 'claiming' || state === 'finalizing';
  $('join').disabled = !client || waiting || state === 'matched' || state === 'joining';
  $('cancel').disabled = !waiting;
  $('end').disabled = state !== 'matched';
}

function showError(err) {
  const text = err instanceof MatchmakerError ? `${err.code}: ${err.detail || ''}` : String(err && err.message || err);
  $('error').textContent = text;
  log('error ' + text);
}

function onEvent(ev) {
  log('event ' + JSON.stringify(ev));
  if (ev.type === 'match.created' && ev.tickets.includes(ticket)) {
    session = ev.session_id;
    $('session').textContent = session;
    $('partner').textContent = ev.users.find((u) => u !== client.user) || '–';
    setState('matched');
  } else if (ev.type === 'session.ended' && ev.session_id === session) {
    setState('ended');
    log(`session ended by ${ev.ended_by || '(expired)'}: ${ev.reason}`);
  } else if (ev.type === 'state' && ev.ticket === ticket) {
    setState(ev.state);
  }
}

async function start() {
  try {
    const res = await fetch('/v1/console/demo', { method: 'POST' });
    const body = await res.json();
    if (!res.ok) throw new MatchmakerError(res.status, body.error, body.detail, body);
    $('user').textContent = body.user;
    $('queue').textContent = body.queue;
    document.body.dataset.queue = body.queue;
    client = new MatchmakerClient({ url: location.origin, user: body.user, token: body.token });
    stream = client.events({
      onEvent,
      onOpen: () => { $('stream').textContent = 'open'; log('event stream open'); },
      onClose: (c) => { $('stream').textContent = c.willRetry ? 'reconnecting…' : 'closed'; },
    });
    await stream.opened();
    setState('idle');
  } catch (err) {
    showError(err);
  }
}

$('join').addEventListener('click', async () => {
  $('error').textContent = '';
  session = null;
  $('session').textContent = '–';
  $('partner').textContent = '–';
  setState('joining');
  try {
    // The ticket id is chosen here, so an event that comes before the
    // join's answer is recognised.
    ticket = newTicketId();
    $('ticket').textContent = ticket;
    const t = await client.join($('queue').textContent, { ticket });
    log('join ' + JSON.stringify(t));
    // The event may have come first; a later answer must not undo it.
    if (document.body.dataset.state === 'joining') setState(t.state);
    if (t.state === 'matched' && t.session_id) {
      session = t.session_id;
      $('session').textContent = session;
    }
  } catch (err) {
    setState('idle');
    showError(err);
  }
});

$('cancel').addEventListener('click', async () => {
  try {
    const t = await client.cancel(ticket);
    log('cancel ' + JSON.stringify(t));
    if (t.state !== 'matched') setState(t.state);
  } catch (err) {
    showError(err);
  }
});

$('end').addEventListener('click', async () => {
  try {
    const r = await client.endSession(session, 'ended on the demo page');
    log('end ' + JSON.stringify(r));
    setState('ended');
  } catch (err) {
    showError(err);
  }
});

start();

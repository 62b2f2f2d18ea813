// The operator's part of the console page (docs/console.md "Acting"): who
// is logged in and with which role, a user's lookup with the actions an
// operator may take on it (cancel its ticket, end its session), its
// session's members from the database, pause and resume per queue, drain
// and resume of the node, and the audit log. A
// viewer sees no action buttons; the server refuses its actions anyway
// (403 forbidden_role) and audits the refusal.

const $ = (id) => document.getElementById(id);
const LIVE = new Set(['claiming', 'queued', 'finalizing']);
let token = null;
let role = 'viewer';
let looked = ''; // the user of the last lookup

async function call(method, path) {
  const res = await fetch(path, { method, headers: { Authorization: 'Bearer ' + token } });
  let body = {};
  try {
    body = await res.json();
  } catch {
    // an empty or non-JSON answer: the status says enough
  }
  return { status: res.status, body };
}

function cell(tr, text) {
  tr.insertCell().textContent = text ?? '';
}

export async function refreshAudit() {
  const r = await call('GET', '/v1/console/audit');
  if (r.status !== 200) return;
  const rows = $('audit');
  rows.textContent = '';
  for (const e of r.body.entries.slice(-20).reverse()) {
    const tr = rows.insertRow();
    tr.dataset.action = e.action;
    tr.dataset.operator = e.operator;
    tr.dataset.status = String(e.status);
    cell(tr, new Date(e.at_ms).toLocaleTimeString());
    cell(tr, `${e.operator} (${e.role})`);
    cell(tr, e.action);
    cell(tr, Object.entries(e.target || {}).map(([k, v]) => `${k}=${v}`).join(' '));
    cell(tr, e.error ? `${e.status} ${e.error}` : String(e.status));
  }
}

function showLookup(status, body) {
  $('lookup-result').hidden = false;
  const rows = $('lookup-table');
  rows.textContent = '';
  $('lookup-result').dataset.status = String(status);
  if (status !== 200) {
    const tr = rows.insertRow();
    cell(tr, body.error || String(status));
    cell(tr, body.detail || '');
    $('cancel-ticket').hidden = true;
    $('end-session').hidden = true;
    return;
  }
  for (const key of ['user', 'state', 'queue', 'ticket', 'session_id', 'detail']) {
    if (body[key] === undefined || body[key] === '') continue;
    const tr = rows.insertRow();
    cell(tr, key);
    cell(tr, body[key]);
    tr.cells[1].dataset.field = key;
  }
  const operator = role === 'operator';
  $('cancel-ticket').hidden = !(operator && LIVE.has(body.state) && body.ticket);
  $('cancel-ticket').dataset.ticket = body.ticket || '';
  $('end-session').hidden = !(operator && body.state === 'matched' && body.session_id);
  $('end-session').dataset.session = body.session_id || '';
  $('show-session').hidden = !body.session_id;
  $('show-session').dataset.session = body.session_id || '';
}

/// The session as the database holds it (any node's): its members.
async function showSession(id) {
  const r = await call('GET', `/v1/console/sessions/${encodeURIComponent(id)}`);
  const box = $('session-result');
  box.hidden = false;
  box.dataset.status = String(r.status);
  const rows = $('session-members');
  rows.textContent = '';
  if (r.status !== 200) {
    $('session-head').textContent = `${r.status} ${r.body.error}: ${r.body.detail}`;
    return;
  }
  const s = r.body;
  const when = new Date(s.created_at_ms).toLocaleTimeString();
  $('session-head').textContent = `${s.session_id} on ${s.queue}: ${s.status} since ${when}` +
    (s.close_reason ? ` (${s.close_reason})` : '');
  box.dataset.session = s.session_id;
  for (const m of s.members) {
    const tr = rows.insertRow();
    tr.dataset.user = m.user;
    cell(tr, m.user);
    cell(tr, m.team === undefined ? '–' : String(m.team));
    cell(tr, m.active ? 'yes' : 'left');
  }
  await refreshAudit();
}

async function lookup(user) {
  looked = user;
  const r = await call('GET', `/v1/console/users/${encodeURIComponent(user)}`);
  showLookup(r.status, r.body);
  await refreshAudit();
}

async function act(path) {
  const r = await call('POST', path);
  const out = $('action-result');
  out.dataset.status = String(r.status);
  out.textContent = r.status === 200 ? 'done' : `${r.status} ${r.body.error}: ${r.body.detail}`;
  out.className = r.status === 200 ? 'muted' : 'error';
  if (looked) await lookup(looked);
  else await refreshAudit();
  return r.status;
}

/// The pause button and the paused badge of a queue's card.
export function decorateQueue(card, name, paused) {
  let button = card.querySelector('button.pause');
  if (!button) {
    button = document.createElement('button');
    button.className = 'pause act';
    button.type = 'button';
    button.addEventListener('click', () => {
      const verb = button.dataset.paused === 'true' ? 'resume' : 'pause';
      act(`/v1/console/queues/${encodeURIComponent(name)}/${verb}`);
    });
    card.querySelector('h2').after(button);
  }
  button.dataset.paused = String(paused);
  button.textContent = paused ? 'Resume joins' : 'Pause joins';
  card.classList.toggle('paused', paused);
}

export function showNode(draining) {
  $('node-state').textContent = draining ? 'draining: joins refused, not ready' : 'serving';
  $('node-state').dataset.draining = String(!!draining);
}

export async function startOps(t) {
  token = t;
  const r = await call('GET', '/v1/console/whoami');
  if (r.status !== 200) return false;
  role = r.body.role;
  document.body.dataset.role = role;
  $('whoami').textContent = `${r.body.name} (${role})`;
  await refreshAudit();
  return true;
}

$('lookup-form').addEventListener('submit', (e) => {
  e.preventDefault();
  lookup($('lookup-user').value.trim());
});
$('cancel-ticket').addEventListener('click', () =>
  act(`/v1/console/users/${encodeURIComponent(looked)}/tickets/` +
      `${encodeURIComponent($('cancel-ticket').dataset.ticket)}/cancel`));
$('end-session').addEventListener('click', () =>
  act(`/v1/console/users/${encodeURIComponent(looked)}/sessions/` +
      `${encodeURIComponent($('end-session').dataset.session)}/end`));
$('show-session').addEventListener('click', () => showSession($('show-session').dataset.session));
$('drain-node').addEventListener('click', () => act('/v1/console/node/drain'));
$('resume-node').addEventListener('click', () => act('/v1/console/node/resume'));

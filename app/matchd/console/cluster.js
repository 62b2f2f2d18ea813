// The console's cluster view (docs/console.md "The cluster"): polls
// GET /v1/console/cluster every 2 s, which the node answers with its own
// counters and every live peer's (each bounded by the cluster's forward
// timeout), and shows one row per node: matches/s and joins/s since the
// last poll, users waiting, active sessions, or the peer's error.

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
let token = null;
const last = new Map(); // node -> {t, matched, joins}

function totals(stats) {
  let matched = 0, joins = 0, depth = 0, sessions = 0;
  for (const q of stats.queues || []) {
    matched += q.matched_users || 0;
    joins += q.joins || 0;
    depth += q.depth || 0;
    sessions += q.sessions_active || 0;
  }
  return { matched, joins, depth, sessions };
}

function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
}

export async function refreshCluster() {
  const res = await fetch('/v1/console/cluster', { headers: { Authorization: 'Bearer ' + token } });
  if (!res.ok) {
    $('cluster-note').textContent = `The cluster view answered ${res.status}.`;
    return;
  }
  const c = await res.json();
  const now = Date.now();
  const body = $('cluster');
  body.replaceChildren();
  const nodes = [...c.nodes].sort((a, b) => a.node.localeCompare(b.node));
  for (const n of nodes) {
    const tr = document.createElement('tr');
    tr.dataset.node = n.node;
    cell(tr, n.node + (n.node === c.node ? ' (this node)' : ''));
    if (n.error || !n.stats) {
      tr.dataset.state = 'error';
      cell(tr, 'no answer: ' + (n.error || 'no stats'), 'error');
      tr.lastChild.colSpan = 4;
      body.appendChild(tr);
      continue;
    }
    tr.dataset.state = 'ok';
    const t = totals(n.stats);
    tr.dataset.matched = String(t.matched);
    const prev = last.get(n.node);
    const dt = prev ? (now - prev.t) / 1000 : 0;
    const rate = (k) => (dt > 0 ? Math.max(0, (t[k] - prev[k]) / dt) : 0);
    cell(tr, dt > 0 ? (rate('matched') / 2).toFixed(1) : '–');
    cell(tr, dt > 0 ? rate('joins').toFixed(1) : '–');
    cell(tr, String(t.depth));
    cell(tr, String(t.sessions));
    last.set(n.node, { t: now, ...t });
    body.appendChild(tr);
  }
  $('cluster-note').textContent =
    `${nodes.length} node${nodes.length === 1 ? '' : 's'} answered through ${c.node}.`;
}

export function startCluster(t) {
  token = t;
  const tick = () => refreshCluster().catch(() => {}).finally(() => setTimeout(tick, POLL_MS));
  tick();
}

// The live page of the matchd console: polls GET /v1/console/stats every
// second with the operator token and draws, per queue, depth, joins/s,
// matches/s, active sessions and time-to-match percentiles with a
// histogram (plain canvas). Rates and the histogram cover the last 10 s:
// differences between polls of the server's counters, which only grow.

import { startCluster } from './cluster.js';
import { clearCanvas, startHistory } from './history.js';
import { decorateQueue, refreshAudit, showNode, startOps } from './ops.js';

const POLL_MS = 1000;
const WINDOW = 10; // polls
const KEY = 'matchd-console-token';

const $ = (id) => document.getElementById(id);
let token = null;
let samples = []; // {t, queues: Map name -> {joins, matched, buckets}}
let bounds = [];
let timer = null;

function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
    // The token is not left in the address bar (it never reaches the
    // server: a fragment is not sent).
    history.replaceState(null, '', location.pathname);
  }
  return sessionStorage.getItem(KEY);
}

function fmtRate(x) {
  if (!isFinite(x)) return '–';
  return x >= 100 ? x.toFixed(0) : x.toFixed(1);
}

function fmtSeconds(s) {
  if (!s) return '–';
  if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 1 : 0) + ' ms';
  if (s < 60) return s.toFixed(2) + ' s';
  return (s / 60).toFixed(1) + ' min';
}

function boundLabel(b) {
  if (b === undefined) return '+Inf';
  return b < 1 ? Math.round(b * 1000) + 'ms' : b < 60 ? b + 's' : b / 60 + 'm';
}

// The q quantile of `buckets` (one per bound, then +Inf), interpolated.
function quantile(buckets, q) {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (!total) return 0;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    if (!buckets[i]) continue;
    if (below + buckets[i] >= rank) {
      if (i === bounds.length) return bounds[bounds.length - 1];
      const lo = i === 0 ? 0 : bounds[i - 1];
      return lo + (bounds[i] - lo) * ((rank - below) / buckets[i]);
    }
    below += buckets[i];
  }
  return bounds[bounds.length - 1];
}

function drawHistogram(canvas, buckets) {
  const { g, w, h } = clearCanvas(canvas, 180);
  const left = 36, bottom = 22, top = 8;
  const n = buckets.length;
  const max = Math.max(1, ...buckets);
  const bw = (w - left - 4) / n;
  g.font = '10px system-ui, sans-serif';
  g.fillStyle = '#687082';
  g.strokeStyle = '#dde1e8';
  g.beginPath();
  g.moveTo(left, top);
  g.lineTo(left, h - bottom);
  g.lineTo(w, h - bottom);
  g.stroke();
  g.textAlign = 'right';
  g.fillText(String(max), left - 4, top + 8);
  g.fillText('0', left - 4, h - bottom);
  let drawn = 0;
  for (let i = 0; i < n; i++) {
    const bh = ((h - bottom - top) * buckets[i]) / max;
    if (buckets[i] > 0) {
      g.fillStyle = '#2f6fde';
      g.fillRect(left + i * bw + 1, h - bottom - bh, Math.max(1, bw - 2), bh);
      drawn++;
    }
    if (i % 2 === 0 || n <= 10) {
      g.fillStyle = '#687082';
      g.textAlign = 'center';
      g.fillText(boundLabel(bounds[i]), left + i * bw + bw / 2, h - 8);
    }
  }
  canvas.dataset.bars = String(drawn);
  canvas.dataset.total = String(buckets.reduce((a, b) => a + b, 0));
}

function queueCard(name) {
  const id = 'q-' + name.replace(/[^A-Za-z0-9_-]/g, '_');
  let card = document.getElementById(id);
  if (card) return card;
  card = document.createElement('section');
  card.className = 'queue';
  card.id = id;
  card.dataset.queue = name;
  const rows = [
    ['depth', 'waiting (depth)'],
    ['joins-rate', 'joins/s'],
    ['matches-rate', 'matches/s'],
    ['sessions', 'sessions active'],
    ['p50', 'time to match p50'],
    ['p90', 'time to match p90'],
    ['p99', 'time to match p99'],
    ['matches-total', 'matched users, total'],
  ];
  const left = document.createElement('div');
  const h2 = document.createElement('h2');
  h2.textContent = name;
  left.appendChild(h2);
  const table = document.createElement('table');
  for (const [cls, label] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = label;
    const td = tr.insertCell();
    td.className = cls;
    td.textContent = '–';
  }
  left.appendChild(table);
  const right = document.createElement('div');
  const title = document.createElement('div');
  title.className = 'hist-title';
  title.textContent = 'time to match, last 10 s';
  const canvas = document.createElement('canvas');
  canvas.className = 'histogram';
  right.append(title, canvas);
  card.append(left, right);
  $('queues').appendChild(card);
  return card;
}

function render(stats) {
  const n = stats.node;
  $('node').textContent = `node ${n.id} · up ${Math.round((n.now_ms - n.started_ms) / 1000)} s`;
  $('session-actors').textContent = n.session_actors ?? '–';
  $('websockets').textContent = n.websockets ?? '–';
  $('connections').textContent = n.connections ?? '–';
  $('demo-link').hidden = !stats.demo_queue;
  showNode(n.draining);
  // The ready check and backfill (docs/groups.md), counted since start.
  const p = n.proposals || {}, b = n.backfill || {};
  for (const [id, v] of [['proposals-made', p.made], ['proposals-accepted', p.accepted],
                         ['proposals-declined', p.declined], ['proposals-timed-out', p.timed_out],
                         ['backfill-requests', b.requests], ['backfill-seats', b.seats_filled]]) {
    $(id).textContent = v ?? '–';
    $(id).dataset.value = String(v ?? 0);
  }
  $('backfill-p95').textContent = fmtSeconds(b.fill_p95_s);
  bounds = stats.time_to_match_bounds_s;
  const now = { t: n.now_ms, queues: new Map() };
  for (const q of stats.queues)
    now.queues.set(q.name, { joins: q.joins, matched: q.matched_users, buckets: q.time_to_match.buckets });
  samples.push(now);
  if (samples.length > WINDOW + 1) samples.shift();
  const old = samples[0];
  const dt = (now.t - old.t) / 1000;
  let totalMatches = 0, totalJoins = 0, totalSessions = 0;
  for (const q of stats.queues) {
    const card = queueCard(q.name);
    decorateQueue(card, q.name, (stats.paused_queues || []).includes(q.name));
    const prev = old.queues.get(q.name) || { joins: 0, matched: 0, buckets: q.time_to_match.buckets.map(() => 0) };
    const joinsRate = dt > 0 ? (q.joins - prev.joins) / dt : NaN;
    const matchesRate = dt > 0 ? (q.matched_users - prev.matched) / 2 / dt : NaN;
    let win = q.time_to_match.buckets.map((c, i) => c - (prev.buckets[i] || 0));
    let label = 'time to match, last 10 s';
    if (samples.length < 2 || !win.some((x) => x > 0)) {
      win = q.time_to_match.buckets;
      label = 'time to match, since start';
    }
    card.querySelector('.hist-title').textContent = label;
    card.querySelector('.depth').textContent = q.depth;
    card.querySelector('.joins-rate').textContent = fmtRate(joinsRate);
    card.querySelector('.matches-rate').textContent = fmtRate(matchesRate);
    card.querySelector('.matches-rate').dataset.value = String(isFinite(matchesRate) ? matchesRate : 0);
    card.querySelector('.sessions').textContent = q.sessions_active;
    card.querySelector('.p50').textContent = fmtSeconds(quantile(win, 0.5));
    card.querySelector('.p90').textContent = fmtSeconds(quantile(win, 0.9));
    card.querySelector('.p99').textContent = fmtSeconds(quantile(win, 0.99));
    card.querySelector('.matches-total').textContent = q.matched_users;
    drawHistogram(card.querySelector('canvas'), win);
    if (isFinite(matchesRate)) totalMatches += matchesRate;
    if (isFinite(joinsRate)) totalJoins += joinsRate;
    totalSessions += q.sessions_active;
  }
  $('total-matches-rate').textContent = samples.length > 1 ? fmtRate(totalMatches) : '–';
  $('total-matches-rate').dataset.value = String(totalMatches);
  $('total-joins-rate').textContent = samples.length > 1 ? fmtRate(totalJoins) : '–';
  $('total-sessions').textContent = totalSessions;
  document.body.dataset.polls = String((+document.body.dataset.polls || 0) + 1);
  // Other operators' actions show within 5 s.
  if (++audits % 5 === 0) refreshAudit();
}

async function poll() {
  try {
    const res = await fetch('/v1/console/stats', { headers: { Authorization: 'Bearer ' + token } });
    if (res.status === 401) {
      sessionStorage.removeItem(KEY);
      showLogin('The token was refused.');
      return;
    }
    if (!res.ok) throw new Error(`stats: HTTP ${res.status}`);
    render(await res.json());
    $('window-note').className = 'muted';
    $('window-note').textContent = 'Rates and percentiles over the last 10 s, refreshed every second.';
  } catch (err) {
    $('window-note').className = 'error';
    $('window-note').textContent = `Cannot reach matchd (${err.message}); retrying.`;
  }
  timer = setTimeout(poll, POLL_MS);
}

function showLogin(why) {
  clearTimeout(timer);
  $('live').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = why || '';
  $('node').textContent = 'signed out';
}

let audits = 0;

async function start() {
  $('login').hidden = true;
  $('live').hidden = false;
  samples = [];
  if (!(await startOps(token))) {
    sessionStorage.removeItem(KEY);
    showLogin('The token was refused.');
    return;
  }
  poll();
  startHistory(token, () => bounds);
  startCluster(token);
}

$('login').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $('token').value;
  sessionStorage.setItem(KEY, token);
  start();
});

token = takeToken();
if (token) start();
else showLogin();

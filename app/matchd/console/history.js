// The console's last hour (docs/console.md "The last hour"): polls
// GET /v1/console/history every 30 s and draws, per sample interval, the
// node's matches/s and joins/s (lines) and its time-to-match p99 (the
// figure under the chart). The server keeps the samples: the hour is there
// whether or not a page was open.

const $ = (id) => document.getElementById(id);
const POLL_MS = 30000;
let token = null;

function quantile(bounds, buckets, q) {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (!total || !bounds.length) return 0;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    if (below + buckets[i] >= q * total) return i < bounds.length ? bounds[i] : bounds[bounds.length - 1];
    below += buckets[i];
  }
  return bounds[bounds.length - 1];
}

function fmt(s) {
  if (!s) return '–';
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(s < 10 ? 1 : 0)} s`;
}

/// A cleared 2D context of `canvas` sized to its box (in CSS pixels,
/// sharp on high-density screens), with the box's width and height.
export function clearCanvas(canvas, defaultHeight) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600, h = canvas.clientHeight || defaultHeight;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

function draw(canvas, points) {
  const { g, w, h } = clearCanvas(canvas, 140);
  const left = 40, bottom = 18, top = 8;
  const max = Math.max(1, ...points.map((p) => Math.max(p.matches, p.joins)));
  g.font = '10px system-ui, sans-serif';
  g.fillStyle = '#687082';
  g.textAlign = 'right';
  g.fillText(max.toFixed(max >= 10 ? 0 : 1) + '/s', left - 4, top + 8);
  g.fillText('0', left - 4, h - bottom);
  const x = (i) => left + (points.length > 1 ? (i * (w - left - 4)) / (points.length - 1) : 0);
  const y = (v) => h - bottom - ((h - bottom - top) * v) / max;
  for (const [key, color] of [['joins', '#9aa3b5'], ['matches', '#2f6fde']]) {
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(x(i), y(p[key])) : g.moveTo(x(i), y(p[key]))));
    g.stroke();
  }
  canvas.dataset.points = String(points.length);
}

export async function refreshHistory(bounds) {
  const res = await fetch('/v1/console/history', { headers: { Authorization: 'Bearer ' + token } });
  if (!res.ok) return;
  const h = await res.json();
  const s = h.samples;
  const points = [];
  for (let i = 1; i < s.length; i++) {
    const dt = (s[i].t_ms - s[i - 1].t_ms) / 1000;
    if (dt <= 0) continue;
    points.push({
      matches: (s[i].matched_users - s[i - 1].matched_users) / 2 / dt,
      joins: (s[i].joins - s[i - 1].joins) / dt,
      p99: quantile(bounds, s[i].time_to_match.map((c, k) => c - s[i - 1].time_to_match[k]), 0.99),
    });
  }
  draw($('history'), points);
  const matched = s.length > 1 ? s[s.length - 1].matched_users - s[0].matched_users : 0;
  $('history').dataset.matched = String(matched);
  const minutes = ((s.length - 1) * h.interval_s) / 60;
  $('history-note').textContent = points.length
    ? `${matched} users matched over the last ${minutes.toFixed(minutes < 10 ? 1 : 0)} min ` +
      `(a point every ${h.interval_s} s); worst time-to-match p99 ${fmt(Math.max(...points.map((p) => p.p99)))}`
    : `The first point comes ${h.interval_s} s after the node started.`;
}

export function startHistory(t, bounds) {
  token = t;
  const tick = () => refreshHistory(bounds()).finally(() => setTimeout(tick, POLL_MS));
  tick();
}

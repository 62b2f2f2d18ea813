// Drives headless Chromium (Debian's chromium, through playwright-core from
// clients/js/node_modules) against a real matchd: the console's live page
// under `matchctl load` shows non-zero matches/s and a drawn histogram; two
// demo pages in one browser are matched with each other and show the same
// session id, then one ends it and both see the end. Saves screenshots.
//   node console_browser.mjs URL CONSOLE_TOKEN CLIENT_DIR SHOT_DIR
import assert from 'node:assert/strict';
import path from 'node:path';

import { launch } from '../support/chromium.mjs';

const [url, consoleToken, clientDir, shotDir] = process.argv.slice(2);
const { context, close } = await launch(clientDir, { width: 1100, height: 720 });
const errors = [];
function watch(page, name) {
  page.on('pageerror', (e) => errors.push(`${name}: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`${name}: console: ${m.text()}`); });
}

try {
  // -- the live page ---------------------------------------------------------
  const live = await context.newPage();
  watch(live, 'console');
  await live.goto(`${url}/console/#token=${encodeURIComponent(consoleToken)}`);
  // The token left the address bar; the page polls with it.
  assert.equal(new URL(live.url()).hash, '');
  await live.waitForFunction(() => {
    const card = document.querySelector('section.queue[data-queue="default"]');
    if (!card) return false;
    const rate = Number(card.querySelector('.matches-rate').dataset.value || 0);
    const bars = Number(card.querySelector('canvas.histogram').dataset.bars || 0);
    return rate > 0 && bars > 0 && Number(document.body.dataset.polls || 0) >= 3;
  }, null, { timeout: 20000, polling: 200 });
  const shown = await live.evaluate(() => {
    const card = document.querySelector('section.queue[data-queue="default"]');
    return {
      matchesRate: Number(card.querySelector('.matches-rate').dataset.value),
      total: Number(document.getElementById('total-matches-rate').dataset.value),
      p50: card.querySelector('.p50').textContent,
      bars: Number(card.querySelector('canvas.histogram').dataset.bars),
      histTotal: Number(card.querySelector('canvas.histogram').dataset.total),
    };
  });
  assert.ok(shown.matchesRate > 0, `matches/s ${shown.matchesRate}`);
  assert.ok(shown.bars > 0 && shown.histTotal > 0, 'a histogram was drawn');
  assert.notEqual(shown.p50, '–');
  // The ready check's tiles: the load before this made and declined some.
  const tiles = await live.evaluate(() => Object.fromEntries(
    ['proposals-made', 'proposals-accepted', 'proposals-declined', 'backfill-requests']
      .map((id) => [id, Number(document.getElementById(id).dataset.value)])));
  assert.ok(tiles['proposals-made'] > 0, `proposals made ${tiles['proposals-made']}`);
  assert.ok(tiles['proposals-accepted'] > 0 && tiles['proposals-declined'] > 0,
            JSON.stringify(tiles));
  assert.ok(tiles['backfill-requests'] >= 0, JSON.stringify(tiles));
  // The canvas really has blue bars in it (not only the data attributes).
  const blue = await live.evaluate(() => {
    const c = document.querySelector('section.queue[data-queue="default"] canvas.histogram');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === 0x2f && d[i + 1] === 0x6f && d[i + 2] === 0xde) n++;
    return n;
  });
  assert.ok(blue > 50, `histogram pixels ${blue}`);
  await live.screenshot({ path: path.join(shotDir, 'console.png') });
  console.log('console page:', JSON.stringify(shown));

  // A wrong token is refused and the page asks for one.
  const denied = await context.newPage();
  watch(denied, 'denied');
  await denied.goto(`${url}/console/#token=not-the-operator-token`);
  await denied.waitForSelector('#login:not([hidden])');
  await denied.waitForFunction(() => document.getElementById('login-error').textContent.includes('refused'));
  await denied.close();
  errors.splice(0, errors.length, ...errors.filter((e) => !e.includes('401')));

  // -- two demo pages in one browser -------------------------------------------
  const a = await context.newPage();
  const b = await context.newPage();
  watch(a, 'demo A');
  watch(b, 'demo B');
  await Promise.all([a.goto(`${url}/console/demo.html`), b.goto(`${url}/console/demo.html`)]);
  for (const p of [a, b]) await p.waitForFunction(() => document.getElementById('stream').textContent === 'open' && document.body.dataset.state === 'idle');
  const users = await Promise.all([a, b].map((p) => p.textContent('#user')));
  assert.notEqual(users[0], users[1]);
  await a.click('#join');
  await a.waitForFunction(() => document.body.dataset.state === 'queued');
  await b.click('#join');
  for (const p of [a, b]) await p.waitForFunction(() => document.body.dataset.state === 'matched', null, { timeout: 20000 });
  const sessions = await Promise.all([a, b].map((p) => p.textContent('#session')));
  assert.match(sessions[0], /\S{8,}/);
  assert.equal(sessions[0], sessions[1], 'both pages show the same session id');
  assert.equal(await a.textContent('#partner'), users[1]);
  assert.equal(await b.textContent('#partner'), users[0]);
  await a.screenshot({ path: path.join(shotDir, 'demo.png') });
  console.log('demo pages matched in session', sessions[0]);
  // One ends the session; both hear session.ended and may join again.
  await b.click('#end');
  for (const p of [a, b]) await p.waitForFunction(() => document.body.dataset.state === 'ended');
  assert.equal(await a.isEnabled('#join'), true);
  assert.deepEqual(errors, []);
} finally {
  await close();
}

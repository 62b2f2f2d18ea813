// The console's cluster view in headless Chromium (Debian's chromium,
// through playwright-core from clients/js/node_modules): node 1's page
// shows one row per live node, each with its counters, and a rate once it
// has polled twice.
//   node console_cluster.mjs URL TOKEN CLIENT_DIR SHOT_DIR
import assert from 'node:assert/strict';
import path from 'node:path';

import { launch } from '../support/chromium.mjs';

const [url, token, clientDir, shotDir] = process.argv.slice(2);
const { context, close } = await launch(clientDir, { width: 1100, height: 900 });
const errors = [];
try {
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${url}/console/#token=${encodeURIComponent(token)}`);
  await page.waitForFunction(() => document.querySelectorAll('#cluster tr[data-state="ok"]').length === 3,
                             null, { timeout: 15000, polling: 100 });
  const rows = await page.evaluate(() => [...document.querySelectorAll('#cluster tr')].map((tr) => ({
    node: tr.dataset.node, matched: Number(tr.dataset.matched), text: tr.textContent,
  })));
  assert.deepEqual(rows.map((r) => r.node), ['node-1', 'node-2', 'node-3']);
  for (const r of rows) assert.ok(r.matched >= 100, JSON.stringify(r));
  assert.match(rows[0].text, /this node/);
  assert.match(await page.textContent('#cluster-note'), /3 nodes answered through node-1/);
  // A second poll gives each row a rate (0.0 now: the load is over).
  await page.waitForFunction(() => [...document.querySelectorAll('#cluster tr')]
    .every((tr) => /\d+\.\d/.test(tr.children[1].textContent)), null, { timeout: 10000, polling: 200 });
  await page.screenshot({ path: path.join(shotDir, 'console-cluster.png'), fullPage: true });
  assert.deepEqual(errors, []);
  console.log('console cluster view: rows', rows.map((r) => `${r.node}=${r.matched}`).join(' '));
} finally {
  await close();
}

// The console's operator actions in headless Chromium (Debian's chromium,
// through playwright-core from clients/js/node_modules) against a real
// matchd: the operator looks up a waiting user and cancels its ticket,
// looks up a matched user and ends its session; the viewer sees no action
// button and its forced action is refused 403; the matched user's session
// is shown from the database, then ended; the page's audit log shows
// them all; the last hour is drawn.
//   node console_ops.mjs URL OPERATOR_TOKEN VIEWER_TOKEN WAITING MATCHED CLIENT_DIR SHOT_DIR
import assert from 'node:assert/strict';
import path from 'node:path';

import { launch } from '../support/chromium.mjs';

const [url, operatorToken, viewerToken, waiting, matched, clientDir, shotDir] = process.argv.slice(2);
const { context, close } = await launch(clientDir, { width: 1100, height: 900 });
const errors = [];
function watch(page, name) {
  page.on('pageerror', (e) => errors.push(`${name}: ${e.message}`));
}

async function open(token, name) {
  const page = await context.newPage();
  watch(page, name);
  await page.goto(`${url}/console/#token=${encodeURIComponent(token)}`);
  await page.waitForFunction(() => document.body.dataset.role && Number(document.body.dataset.polls || 0) >= 1,
                             null, { timeout: 15000, polling: 100 });
  return page;
}

async function lookUp(page, user) {
  await page.fill('#lookup-user', user);
  await page.click('#lookup-form button[type=submit]');
  await page.waitForFunction((u) => {
    const cell = document.querySelector('#lookup-table td[data-field="user"]');
    return cell && cell.textContent === u;
  }, user, { timeout: 10000, polling: 100 });
  return page.evaluate(() => Object.fromEntries(
    [...document.querySelectorAll('#lookup-table td[data-field]')].map((td) => [td.dataset.field, td.textContent])));
}

async function auditRows(page) {
  return page.evaluate(() => [...document.querySelectorAll('#audit tr')].map((tr) => ({
    action: tr.dataset.action, operator: tr.dataset.operator, status: Number(tr.dataset.status),
  })));
}

try {
  // -- the operator -----------------------------------------------------------
  const op = await open(operatorToken, 'operator');
  assert.equal(await op.evaluate(() => document.body.dataset.role), 'operator');
  assert.match(await op.textContent('#whoami'), /alice \(operator\)/);
  assert.ok(await op.isVisible('#drain-node'), 'an operator sees the node actions');
  // The last hour: points drawn from the node's samples (one a second here).
  await op.waitForFunction(() => {
    const c = document.getElementById('history');
    return Number(c.dataset.points || 0) >= 2 && Number(c.dataset.matched || 0) >= 2;
  }, null, { timeout: 10000, polling: 200 });
  assert.match(await op.textContent('#history-note'), /users matched over the last/);

  let seen = await lookUp(op, waiting);
  assert.equal(seen.state, 'queued', JSON.stringify(seen));
  assert.ok(await op.isVisible('#cancel-ticket'), 'cancel offered for a waiting user');
  assert.ok(!(await op.isVisible('#end-session')), 'no end for a waiting user');
  await op.click('#cancel-ticket');
  await op.waitForFunction(() => document.getElementById('action-result').dataset.status === '200',
                           null, { timeout: 10000, polling: 100 });
  await op.waitForFunction(() => {
    const cell = document.querySelector('#lookup-table td[data-field="state"]');
    return cell && cell.textContent === 'cancelled';
  }, null, { timeout: 10000, polling: 100 });
  console.log('operator cancelled', waiting);

  seen = await lookUp(op, matched);
  assert.equal(seen.state, 'matched', JSON.stringify(seen));
  assert.ok(seen.session_id, 'a matched user shows its session');
  assert.ok(await op.isVisible('#end-session'), 'end offered for a matched user');
  // Its session from the database: the members, still in it.
  await op.click('#show-session');
  await op.waitForFunction(() => document.getElementById('session-result').dataset.status === '200',
                           null, { timeout: 10000, polling: 100 });
  const members = await op.evaluate(() =>
    [...document.querySelectorAll('#session-members tr')].map((tr) => [tr.dataset.user, tr.cells[2].textContent]));
  assert.ok(members.some(([u, inIt]) => u === matched && inIt === 'yes'), JSON.stringify(members));
  assert.equal(members.length, 2, JSON.stringify(members));
  assert.match(await op.textContent('#session-head'), /: active since/);
  await op.evaluate(() => { document.getElementById('action-result').dataset.status = ''; });
  await op.click('#end-session');
  await op.waitForFunction(() => document.getElementById('action-result').dataset.status === '200',
                           null, { timeout: 10000, polling: 100 });
  console.log('operator ended session', seen.session_id);
  // The database has it ended, with the operator in its reason.
  const ended = await op.evaluate(async ([id, t]) => {
    const res = await fetch(`/v1/console/sessions/${encodeURIComponent(id)}`,
                            { headers: { Authorization: 'Bearer ' + t } });
    return { status: res.status, body: await res.json() };
  }, [seen.session_id, operatorToken]);
  assert.equal(ended.status, 200, JSON.stringify(ended));
  assert.equal(ended.body.status, 'closed', JSON.stringify(ended));
  assert.match(ended.body.close_reason, /alice/, JSON.stringify(ended));

  // -- the viewer -------------------------------------------------------------
  const viewer = await open(viewerToken, 'viewer');
  assert.equal(await viewer.evaluate(() => document.body.dataset.role), 'viewer');
  const looked = await lookUp(viewer, waiting);
  assert.equal(looked.state, 'cancelled', JSON.stringify(looked));
  for (const id of ['#cancel-ticket', '#end-session', '#drain-node', '#resume-node', 'button.pause'])
    assert.ok(!(await viewer.isVisible(id)), `a viewer sees no ${id}`);
  // The buttons are only hidden: the server refuses the action itself.
  const forced = await viewer.evaluate(async ([u, t]) => {
    const res = await fetch(`/v1/console/users/${encodeURIComponent(u)}/sessions/whatever/end`, {
      method: 'POST', headers: { Authorization: 'Bearer ' + t } });
    return { status: res.status, body: await res.json() };
  }, [matched, viewerToken]);
  assert.equal(forced.status, 403, JSON.stringify(forced));
  assert.equal(forced.body.error, 'forbidden_role');
  await viewer.screenshot({ path: path.join(shotDir, 'console-viewer.png') });

  // -- the audit log, as the operator's page shows it ---------------------------
  await op.reload();
  await op.waitForFunction(() => document.querySelectorAll('#audit tr').length >= 4,
                           null, { timeout: 10000, polling: 200 });
  const rows = await auditRows(op);
  const has = (action, operator, status) =>
    rows.some((r) => r.action === action && r.operator === operator && r.status === status);
  assert.ok(has('cancel_ticket', 'alice', 200), JSON.stringify(rows));
  assert.ok(has('end_session', 'alice', 200), JSON.stringify(rows));
  assert.ok(has('end_session', 'victor', 403), JSON.stringify(rows));
  assert.ok(has('lookup_user', 'victor', 200), JSON.stringify(rows));
  assert.ok(has('lookup_session', 'alice', 200), JSON.stringify(rows));
  await op.screenshot({ path: path.join(shotDir, 'console-operator.png') });
  assert.deepEqual(errors, []);
  console.log('console_ops: ok');
} finally {
  await close();
}

// The node the client's tests run against. They need queues a node serves
// only when told: "default", "trio" (a lobby of 2..3, parties of up to 2,
// backfill on request) and "ready" (a 1-vs-1 with a ready check), the shapes
// of test/rules.json, an unknown queue refused (no `--queues '*'`), and the
// default --ws-rate (10 a second: the reconnect test floods past it).
//
// - MATCHD_URL and MATCHD_SECRET set: that node is used; it is probed first
//   and the tests stop at once, saying what it lacks, when it is not so set up.
// - Otherwise a private matchd is started on the embedded stores (a free
//   port, a fresh secret, the queues above) and stopped when the tests end:
//   the binary MATCHD names, else build/bin/matchd of this checkout.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { sign } from './token.js';

const here = dirname(fileURLToPath(import.meta.url));
export const QUEUES = ['default', 'trio', 'ready'];
export const RULES = join(here, 'rules.json');
const BUILT = resolve(here, '../../../build/bin/matchd');
const SETUP = `--secret "$MATCHD_SECRET" --queues ${QUEUES.join(',')} ` +
  "--rules clients/js/test/rules.json and the default --ws-rate (not --queues '*')";
const HOW = 'clients/js/README.md, "Tests"';

/** The node's URL and secret: MATCHD_URL's node, checked, or one started here. */
export async function nodeForTests(env = process.env) {
  if (env.MATCHD_URL) {
    if (!env.MATCHD_SECRET) throw new Error(`MATCHD_URL is set but MATCHD_SECRET is not: set it to the node's --secret (${HOW})`);
    await checkNode(env.MATCHD_URL, env.MATCHD_SECRET);
    return { url: env.MATCHD_URL, secret: env.MATCHD_SECRET };
  }
  return startMatchd(env.MATCHD || BUILT, Boolean(env.MATCHD));
}

async function call(url, method, path, token, body) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => ({})) };
}

/** Throws, saying what is missing, unless the node at url is set up as SETUP says. */
export async function checkNode(url, secret) {
  const fail = (what) => {
    throw new Error(`MATCHD_URL=${url}: ${what}. The tests need a matchd started with ${SETUP}; ` +
      `or unset MATCHD_URL and they start one themselves (MATCHD=/path/to/matchd, default build/bin/matchd; ${HOW})`);
  };
  try {
    const r = await fetch(`${url}/readyz`);
    if (r.status !== 200) fail(`/readyz answers ${r.status}`);
  } catch (err) {
    if (err.message.startsWith('MATCHD_URL')) throw err;
    fail(`no answer (${err.cause?.code || err.message})`);
  }
  const user = `probe-${randomBytes(4).toString('hex')}`;
  const tok = sign(secret, user);
  const join = (queue) => call(url, 'POST', `/v1/users/${user}/tickets`, tok, { queue, ticket: `probe-${queue}` });
  const cancel = (queue) => call(url, 'DELETE', `/v1/users/${user}/tickets/probe-${queue}`, tok);
  const absent = await join('no-such-queue');
  if (absent.status === 401) fail(`a token signed with MATCHD_SECRET is refused (${absent.body.error}): not the node's --secret`);
  if (absent.status < 300) {
    await cancel('no-such-queue');
    fail("it serves any queue name (--queues '*'), so an unknown queue is not refused and 'trio' and 'ready' have no shape");
  }
  if (absent.status !== 404 || absent.body.error !== 'unknown_queue') {
    fail(`a join of an unknown queue answered ${absent.status} ${absent.body.error}, not 404 unknown_queue`);
  }
  for (const queue of QUEUES) {
    const r = await join(queue);
    if (r.status >= 300) fail(`a join of queue '${queue}' answered ${r.status} ${r.body.error}`);
    await cancel(queue);
  }
}

/** Starts matchd (bin) on a free port; stopped when this process exits. */
async function startMatchd(bin, named) {
  if (!existsSync(bin)) {
    throw new Error(named
      ? `MATCHD=${bin}: no such file`
      : `no matchd at ${bin}: build it (cmake --build build --target matchd) or name one with ` +
        `MATCHD=/path/to/matchd; or set MATCHD_URL and MATCHD_SECRET to a matchd started with ${SETUP} (${HOW})`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'mm-js-test-'));
  const log = join(dir, 'matchd.log');
  const secret = randomBytes(24).toString('base64url');
  const fd = openSync(log, 'w');
  const child = spawn(bin, ['--listen', '127.0.0.1:0', '--secret', secret, '--node', 'js-test',
    '--queues', QUEUES.join(','), '--rules', RULES, '--log-level', 'info'], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  child.unref();
  const tail = () => readFileSync(log, 'utf8').split('\n').slice(-30).join('\n');
  process.on('exit', (code) => {
    child.kill('SIGTERM');
    if (code) process.stderr.write(`--- matchd log (${bin})\n${tail()}\n`);
    rmSync(dir, { recursive: true, force: true });
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => process.exit(128 + (sig === 'SIGINT' ? 2 : 15)));
  const deadline = Date.now() + 15000;
  let url = null;
  while (!url) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      throw new Error(`${bin} did not start (exit ${child.exitCode ?? child.signalCode ?? 'none yet'}):\n${tail()}`);
    }
    url = /listening on (http:\/\/\S+)/.exec(readFileSync(log, 'utf8'))?.[1];
    if (!url) await new Promise((r) => setTimeout(r, 20));
  }
  while ((await fetch(`${url}/readyz`).catch(() => null))?.status !== 200) {
    if (Date.now() > deadline) throw new Error(`${bin} on ${url} is not ready:\n${tail()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { url, secret };
}

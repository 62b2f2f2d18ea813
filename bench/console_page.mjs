// bench/run console: keeps the console's live page open in headless
// Chromium (playwright-core from clients/js) until killed; prints "open"
// once the page has polled twice.
//   node bench/console_page.mjs URL CONSOLE_TOKEN CLIENT_DIR
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';

const [url, token, clientDir] = process.argv.slice(2);
const { chromium } = createRequire(path.join(clientDir, 'package.json'))('playwright-core');
const profile = mkdtempSync(path.join(tmpdir(), 'mm-bench-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  chromiumSandbox: false,
  args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const stop = async () => {
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
const page = await context.newPage();
await page.goto(`${url}/console/#token=${encodeURIComponent(token)}`);
await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 2, null, { timeout: 20000 });
console.log('open');
setInterval(() => {}, 1 << 30);

// Headless Chromium for the page tests: Debian's chromium (or $CHROMIUM)
// driven by playwright-core from CLIENT_DIR's node_modules, in a throwaway
// profile. `close()` ends the browser and removes the profile.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';

export async function launch(clientDir, viewport) {
  const require = createRequire(path.join(clientDir, 'package.json'));
  const { chromium } = require('playwright-core');
  const profile = mkdtempSync(path.join(tmpdir(), 'mm-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    chromiumSandbox: false,
    viewport,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

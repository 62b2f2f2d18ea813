// Helpers of the client's tests: tokens as a host backend signs them
// (docs/api.md: v1.<user b64url>.<expiry>.<HMAC-SHA256 b64url>) and unique
// user names per run.
import { createHmac, randomBytes } from 'node:crypto';

export const url = process.env.MATCHD_URL;
export const secret = process.env.MATCHD_SECRET;

if (!url || !secret) throw new Error('MATCHD_URL and MATCHD_SECRET must be set (tests/integration/js_client_test.sh)');

export function token(user, ttlS = 600) {
  const payload = `v1.${Buffer.from(user).toString('base64url')}.${Math.floor(Date.now() / 1000) + ttlS}`;
  return `${payload}.${createHmac('sha256', secret).update(payload).digest('base64url')}`;
}

const run = randomBytes(4).toString('hex');
let n = 0;
export function uniqueUser(name) {
  n += 1;
  return `${name}-${run}-${n}`;
}

// Helpers of the client's tests: the node they run against (test/matchd.js:
// MATCHD_URL's, checked, or a private one started here), tokens as a host
// backend signs them (test/token.js) and unique user names per run.
import { randomBytes } from 'node:crypto';

import { nodeForTests } from './matchd.js';
import { sign } from './token.js';

export const { url, secret } = await nodeForTests();

export function token(user, ttlS = 600) {
  return sign(secret, user, ttlS);
}

const run = randomBytes(4).toString('hex');
let n = 0;
export function uniqueUser(name) {
  n += 1;
  return `${name}-${run}-${n}`;
}

// Tokens as a host backend signs them (docs/api.md, "Authentication"):
// v1.<user b64url>.<expiry>.<HMAC-SHA256 b64url>. No node needed: the CTest
// scripts sign the examples' tokens with this too.
import { createHmac } from 'node:crypto';

export function sign(secret, user, ttlS = 600) {
  const payload = `v1.${Buffer.from(user).toString('base64url')}.${Math.floor(Date.now() / 1000) + ttlS}`;
  return `${payload}.${createHmac('sha256', secret).update(payload).digest('base64url')}`;
}

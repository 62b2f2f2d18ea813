#!/usr/bin/env node
// Sign a matchd bearer token in a host backend: an HS256 JWT, with Node's
// own crypto module (no packages).
//
//   MATCHD_SECRET=... node sign-token.mjs alice --ttl 600 \
//       --aud matchmaker --iss https://game.example
//
// prints the token; `import { signToken } from './sign-token.mjs'` gives the
// function. The secret is the one matchd was started with (--secret, or
// --secret-next during a key rollover), read from the environment, never
// from the command line. docs/api.md, "Authentication", says which claims
// matchd checks.

import { createHmac } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const b64url = (buf) => Buffer.from(buf).toString('base64url'); // no padding

/**
 * An HS256 JWT for `user` (its `sub`) that expires `ttlS` seconds from `now`
 * (unix seconds, default: the clock). `audience` and `issuer` become `aud`
 * and `iss` when given.
 */
export function signToken(secret, user, { ttlS = 600, audience, issuer, now } = {}) {
  const iat = Math.floor(now ?? Date.now() / 1000);
  const claims = { sub: user, iat, exp: iat + ttlS };
  if (audience !== undefined) claims.aud = audience;
  if (issuer !== undefined) claims.iss = issuer;
  const input = `${b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))}.${b64url(JSON.stringify(claims))}`;
  const signature = createHmac('sha256', secret).update(input).digest();
  return `${input}.${b64url(signature)}`;
}

// Run as a program (not imported).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      ttl: { type: 'string', default: '600' },
      aud: { type: 'string' },
      iss: { type: 'string' },
      'secret-env': { type: 'string', default: 'MATCHD_SECRET' },
    },
  });
  const secret = process.env[values['secret-env']] ?? '';
  if (positionals.length !== 1 || secret.length < 16) {
    console.error(`usage: ${values['secret-env']}=SECRET node sign-token.mjs USER [--ttl S] [--aud A] [--iss I]`);
    console.error(`(the secret: at least 16 bytes, in $${values['secret-env']})`);
    process.exit(2);
  }
  console.log(signToken(secret, positionals[0], {
    ttlS: Number.parseInt(values.ttl, 10),
    audience: values.aud,
    issuer: values.iss,
  }));
}

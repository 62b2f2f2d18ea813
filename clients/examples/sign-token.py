#!/usr/bin/env python3
"""Sign a matchd bearer token in a host backend: an HS256 JWT, with the
Python standard library only (hmac, hashlib, base64, json).

Your backend authenticates its user, then hands the client a token that
lets it act as that user on matchd, for a while:

    MATCHD_SECRET=... python3 sign-token.py alice --ttl 600 \\
        --aud matchmaker --iss https://game.example

prints the token. As a module: sign_token(secret, "alice", ttl_s=600, ...).
The secret is the one matchd was started with (--secret, or --secret-next
during a key rollover); it is read from the environment, never from the
command line (where `ps` would show it). docs/api.md, "Authentication",
says which claims matchd checks. Any JWT library does the same: this file
only shows that nothing more than HMAC-SHA256 is needed.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import time


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 7515, section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign_token(secret, user, ttl_s=600, audience=None, issuer=None, now=None):
    """An HS256 JWT for `user` (its `sub`) that expires `ttl_s` seconds from
    `now` (default: the clock). `audience` and `issuer` become `aud` and
    `iss` when given; matchd checks them against --token-audience and
    --token-issuer."""
    now = int(time.time()) if now is None else int(now)
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"sub": user, "iat": now, "exp": now + int(ttl_s)}
    if audience is not None:
        claims["aud"] = audience
    if issuer is not None:
        claims["iss"] = issuer
    signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode())
                     + "." + b64url(json.dumps(claims, separators=(",", ":")).encode()))
    key = secret.encode() if isinstance(secret, str) else secret
    signature = hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()
    return signing_input + "." + b64url(signature)


def main(argv):
    parser = argparse.ArgumentParser(description="Print a matchd bearer token (HS256 JWT).")
    parser.add_argument("user", help="the user id (1-128 bytes of [A-Za-z0-9_.:@-])")
    parser.add_argument("--ttl", type=int, default=600, help="lifetime in seconds (default 600)")
    parser.add_argument("--aud", help="audience (matchd's --token-audience)")
    parser.add_argument("--iss", help="issuer (matchd's --token-issuer)")
    parser.add_argument("--secret-env", default="MATCHD_SECRET",
                        help="the environment variable holding the secret (default MATCHD_SECRET)")
    args = parser.parse_args(argv)
    secret = os.environ.get(args.secret_env, "")
    if len(secret) < 16:
        sys.exit(f"sign-token: ${args.secret_env} must hold the secret (at least 16 bytes)")
    print(sign_token(secret, args.user, args.ttl, args.aud, args.iss))


if __name__ == "__main__":
    main(sys.argv[1:])

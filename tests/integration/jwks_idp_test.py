#!/usr/bin/env python3
"""Tokens from an identity provider against a real matchd (issue 36, item 2).

Usage: jwks_idp_test.py SOURCE_DIR MATCHD

An identity provider is played here: RSA and P-256 keys made with
python3-cryptography, tokens signed RS256/ES256 by PyJWT (a stock library),
its JWK Set served over HTTP and HTTPS by this script. matchd holds no
secret (no --secret): the provider's tokens are accepted, the kid selects
the key, a rotation of the set is followed (a token naming a new kid makes
matchd read the set again), a failed read keeps the last set; a wrong kid,
key or alg is refused by name; a token's queues scope holds; a set from a
file; HTTPS verified against a CA file and the host name; unusable sets
stop matchd at start.
"""
import http.server, json, os, re, signal, socket, ssl, subprocess, sys
import tempfile, threading, time, urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mm_node import expect, failures, free_port, matchd_node  # noqa: E402
import jwt as pyjwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

src, matchd = (os.path.abspath(p) for p in sys.argv[1:3])
work = tempfile.mkdtemp(prefix="jwks_test_")




def rsa_key(kid):
    priv = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(priv.public_key()))
    jwk.update(kid=kid, use="sig", alg="RS256")
    return priv, jwk


def ec_key(kid):
    priv = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(ECAlgorithm.to_jwk(priv.public_key()))
    jwk.update(kid=kid)
    return priv, jwk


def token(priv, alg, kid, sub, **claims):
    body = {"sub": sub, "exp": int(time.time()) + 120, **claims}
    return pyjwt.encode(body, priv, algorithm=alg, headers={"kid": kid} if kid else None)


class provider:
    """The provider's JWK Set endpoint: serves `keys`, or fails with 500."""

    def __init__(self, tls_ctx=None):
        self.keys, self.fail, self.hits = [], False, 0
        outer = self

        class handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                if outer.fail or self.path != "/jwks.json":
                    self.send_response(500 if outer.fail else 404)
                    self.end_headers()
                    return
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if tls_ctx:
            self.server.socket = tls_ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class node(matchd_node):
    def __init__(self, *args, expect_start=True):
        super().__init__(matchd, ["--queues", "default,q1", *args],
                         os.path.join(work, f"matchd-{free_port()}.log"), expect_start)


def accepted(n, user, tok, what):
    expect(n.probe(user, tok) == (404, "not_found"), f"{what}: {n.probe(user, tok)}")


def refused(n, user, tok, name, what):
    got = n.probe(user, tok)
    expect(got == (401, name), f"{what}: expected 401 {name}, got {got}")


r1, r1_jwk = rsa_key("r1")
r2, r2_jwk = rsa_key("r2")
e1, e1_jwk = ec_key("e1")
forger, _ = rsa_key("r1")

# -- over HTTP, no shared secret --------------------------------------------
idp = provider()
idp.keys = [r1_jwk, e1_jwk]
a = node("--jwks-url", f"http://127.0.0.1:{idp.port}/jwks.json", "--jwks-refresh", "3600")
try:
    accepted(a, "alice", token(r1, "RS256", "r1", "alice"), "RS256 of kid r1")
    accepted(a, "bob", token(e1, "ES256", "e1", "bob"), "ES256 of kid e1")
    st, j = a.call("POST", "/v1/users/alice/tickets", token(r1, "RS256", "r1", "alice"),
                   {"queue": "default", "ticket": "t-1"})
    expect(st == 200 and j.get("state") == "queued", f"a join with an RS256 token: {st} {j}")
    # What the provider did not sign, or signed otherwise, is refused.
    refused(a, "alice", token(forger, "RS256", "r1", "alice"), "bad_signature",
            "another RSA key under kid r1")
    refused(a, "alice", token(e1, "ES256", "r1", "alice"), "unsupported_algorithm",
            "ES256 naming the RSA key's kid")
    refused(a, "alice", pyjwt.encode({"sub": "alice", "exp": int(time.time()) + 60},
                                     "0123456789abcdef0123", algorithm="HS256"),
            "unsupported_algorithm", "HS256 on a node without a secret")
    refused(a, "alice", token(r1, "RS384", "r1", "alice"), "unsupported_algorithm", "RS384")
    # Scope: a token naming q1 joins only q1.
    scoped = token(r1, "RS256", "r1", "carol", queues=["q1"])
    st, j = a.call("POST", "/v1/users/carol/tickets", scoped, {"queue": "default", "ticket": "t-2"})
    expect(st == 403 and j.get("error") == "forbidden", f"a q1 token joining default: {st} {j}")
    st, j = a.call("POST", "/v1/users/carol/tickets", scoped, {"queue": "q1", "ticket": "t-3"})
    expect(st == 200, f"a q1 token joining q1: {st} {j}")

    # -- rotation: r2 replaces r1 ---------------------------------------------
    refused(a, "dave", token(r2, "RS256", "r2", "dave"), "unknown_key", "kid r2 before it is published")
    hits = idp.hits
    idp.keys = [r2_jwk, e1_jwk]
    t0, ok = time.time(), False
    while time.time() - t0 < 20 and not ok:
        ok = a.probe("dave", token(r2, "RS256", "r2", "dave")) == (404, "not_found")
        time.sleep(0.3)
    expect(ok, "a token of the new kid r2 is accepted once the set is rotated")
    expect(idp.hits > hits, "matchd read the set again after a missed kid")
    expect(time.time() - t0 < 12, f"the rotation was followed within 12 s: {time.time() - t0:.1f}")
    refused(a, "alice", token(r1, "RS256", "r1", "alice"), "unknown_key", "retired kid r1")
    # The provider failing: the last set stays in force.
    idp.fail = True
    hits = idp.hits
    refused(a, "erin", token(r1, "RS256", "r9", "erin"), "unknown_key", "kid r9")
    time.sleep(7)  # past the soonest re-read after a missed kid (5 s)
    refused(a, "erin", token(r1, "RS256", "r9", "erin"), "unknown_key", "kid r9 again")
    time.sleep(1)
    expect(idp.hits > hits, "matchd tried to read the set while it failed")
    accepted(a, "dave", token(r2, "RS256", "r2", "dave"), "r2 while the provider fails")
    expect("JWK Set not refreshed" in a.output(), "the failed read is logged")
finally:
    a.stop()

# -- from a file ---------------------------------------------------------------
path = os.path.join(work, "jwks.json")
with open(path, "w") as f:
    json.dump({"keys": [e1_jwk]}, f)
b = node("--jwks-file", path)
try:
    accepted(b, "alice", token(e1, "ES256", "e1", "alice"), "ES256 from a file")
    accepted(b, "alice", token(e1, "ES256", None, "alice"), "no kid, one ES256 key")
    refused(b, "alice", token(r1, "RS256", "r1", "alice"), "unknown_key", "an RSA kid not in the file")
finally:
    b.stop()

# Unusable sets: matchd does not start, and says why.
bad = os.path.join(work, "bad.json")
with open(bad, "w") as f:
    json.dump({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}, f)
for args, why in ((["--jwks-file", bad], "no RS256 or ES256 key"),
                  (["--jwks-file", os.path.join(work, "missing.json")], "cannot read"),
                  (["--jwks-url", f"http://127.0.0.1:{free_port()}/jwks.json"], "JWK Set")):
    n = node(*args, expect_start=False)
    rc = n.proc.wait(timeout=20) if not n.ready else None
    expect(not n.ready and rc == 2 and why in n.output(), f"{args}: rc {rc}, {n.output()[-300:]}")
    n.stop()

# -- over HTTPS: the CA file and the host name ----------------------------------
cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                "-days", "1", "-subj", "/CN=localhost", "-addext",
                "subjectAltName=DNS:localhost"], check=True, capture_output=True)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
tls_idp = provider(ctx)
tls_idp.keys = [r1_jwk]
c = node("--jwks-url", f"https://localhost:{tls_idp.port}/jwks.json", "--jwks-ca-file", cert)
try:
    accepted(c, "alice", token(r1, "RS256", "r1", "alice"), "RS256 with the set over HTTPS")
finally:
    c.stop()
for args, what in (([], "a certificate no CA of the system signed"),
                   (["--jwks-ca-file", cert], "a certificate of another host name")):
    url = (f"https://localhost:{tls_idp.port}/jwks.json" if not args
           else f"https://127.0.0.1:{tls_idp.port}/jwks.json")
    n = node("--jwks-url", url, *args, expect_start=False)
    rc = n.proc.wait(timeout=20) if not n.ready else None
    expect(not n.ready and rc == 2, f"{what}: refused at start (rc {rc})")
    n.stop()

# The error name is documented with the others.
doc = open(os.path.join(src, "docs/api.md")).read()
expect(re.search(r"^\| 401 \| `unknown_key` \|", doc, re.M), "docs/api.md names unknown_key")

print(f"{0 if failures else 1} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)

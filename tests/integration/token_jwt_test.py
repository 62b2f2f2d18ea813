#!/usr/bin/env python3
"""Standard tokens against a real matchd (issue 14, item 3).

Usage: token_jwt_test.py SOURCE_DIR MATCHD

JWTs signed by clients/examples/sign-token.py (and .mjs, and PyJWT, a stock
library) are accepted; tampered, expired, not-yet-valid, wrong-audience,
wrong-issuer, alg none / other alg, oversized tokens are refused 401 with
the error names of docs/api.md; both secrets of a key rollover are accepted
and a retired one is not; a token acts only for its sub; --token-formats.
"""
import base64, hashlib, hmac, importlib.util, json, os, re, signal, socket
import subprocess, sys, tempfile, time, urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mm_node import expect, failures, free_port, matchd_node  # noqa: E402
import jwt as pyjwt  # python3-jwt (deploy/setup.sh): a stock signer

src, matchd = (os.path.abspath(p) for p in sys.argv[1:3])
py_example = os.path.join(src, "clients/examples/sign-token.py")
node_example = os.path.join(src, "clients/examples/sign-token.mjs")
S1 = "rollover-current-0123456789"  # --secret
S2 = "rollover-next-0123456789ab"   # --secret-next
S3 = "rollover-retired-012345678"   # accepted by neither
AUD, ISS = "matchmaker", "https://game.example"




def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_signed(header, claims, secret=S1, digest=hashlib.sha256):
    head = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return head + "." + b64(hmac.new(secret.encode(), head.encode(), digest).digest())


def example_cli(user, *args, secret=S1):
    """A token from the Python example, run as a host backend would."""
    run = subprocess.run([sys.executable, py_example, user, *args], capture_output=True,
                         text=True, env=dict(os.environ, MATCHD_SECRET=secret), timeout=20)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


# The example as a module too: the same code without a process per token.
_spec = importlib.util.spec_from_file_location("sign_token_example", py_example)
example_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example_mod)


def example(user, aud=None, iss=None, ttl=600, secret=S1):
    return example_mod.sign_token(secret, user, ttl, aud, iss)


def node_example_token(user, *args, secret=S1):
    run = subprocess.run(["node", node_example, user, *args], capture_output=True,
                         text=True, env=dict(os.environ, MATCHD_SECRET=secret), timeout=20)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def v1_token(user, exp, secret=S1):
    body = "v1." + b64(user.encode()) + "." + str(exp)
    return body + "." + b64(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest())


class node(matchd_node):
    def __init__(self, *args):
        work = tempfile.mkdtemp(prefix="token_jwt_")
        super().__init__(matchd, list(args), os.path.join(work, "matchd.log"))

    def upgrade(self, user, token):
        """The status of a WebSocket upgrade with ?access_token= (as a browser)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall((f"GET /v1/users/{user}/events?access_token={token} HTTP/1.1\r\n"
                       "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n\r\n").encode())
            head = b""
            while b"\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
            return int(head.split(b" ")[1])


def refused(n, user, token, name, what):
    st, err = n.probe(user, token)
    expect(st == 401 and err == name, f"{what}: expected 401 {name}, got {st} {err}")
    seen.add(name)


# The 401 names docs/api.md documents for tokens: the test must see each.
doc = open(os.path.join(src, "docs/api.md")).read()
# unknown_key is of RS256/ES256 tokens: jwks_idp_test.py sees it.
documented = set(re.findall(r"^\| 401 \| `([a-z_]+)` \|", doc, re.M)) - {"unknown_key"}
seen = set()

a = node("--secret", S1, "--secret-next", S2, "--token-audience", AUD,
         "--token-issuer", ISS, "--token-leeway", "5")
try:
    # -- accepted -------------------------------------------------------------
    tok = example_cli("alice", "--aud", AUD, "--iss", ISS)
    st, j = a.call("POST", "/v1/users/alice/tickets", tok, {"queue": "default", "ticket": "t-1"})
    expect(st == 200 and j.get("user") == "alice" and j.get("state") == "queued",
           f"a join with the Python example's JWT: {st} {j}")
    expect(a.upgrade("alice", tok) == 101, "the event WebSocket with ?access_token=<JWT>")
    # The example's token is a standard JWT: a stock library reads it.
    claims = pyjwt.decode(tok, S1, algorithms=["HS256"], audience=AUD, issuer=ISS)
    expect(claims["sub"] == "alice" and claims["exp"] > time.time(), f"PyJWT reads it: {claims}")
    # ... and matchd takes what a stock library signs.
    stock = pyjwt.encode({"sub": "bob", "exp": int(time.time()) + 60, "aud": [AUD, "chat"],
                          "iss": ISS, "nbf": int(time.time())}, S1, algorithm="HS256")
    expect(a.probe("bob", stock) == (404, "not_found"), "a PyJWT token is accepted")
    nt = node_example_token("carol", "--aud", AUD, "--iss", ISS)
    expect(a.probe("carol", nt) == (404, "not_found"), "the Node example's token is accepted")
    # Both examples sign the same bytes for the same inputs.
    same_py = example_mod.sign_token(S1, "dave", 120, AUD, ISS, now=1800000000)
    same_node = subprocess.run(
        ["node", "--input-type=module", "-e",
         f"import {{ signToken }} from {json.dumps(node_example)};"
         f"console.log(signToken({json.dumps(S1)}, 'dave', {{ ttlS: 120, audience: "
         f"{json.dumps(AUD)}, issuer: {json.dumps(ISS)}, now: 1800000000 }}))"],
        capture_output=True, text=True, timeout=20).stdout.strip()
    expect(same_py == same_node, f"Python and Node sign alike: {same_py} vs {same_node}")
    # matchd's own v1 tokens go on working beside JWTs.
    expect(a.probe("erin", v1_token("erin", int(time.time()) + 60)) == (404, "not_found"),
           "a v1 token is accepted")

    # -- key rollover: the next secret too, a retired one not ------------------
    expect(a.probe("alice", example("alice", AUD, ISS, secret=S2))
           == (404, "not_found"), "a JWT signed with --secret-next is accepted")
    expect(a.probe("erin", v1_token("erin", int(time.time()) + 60, S2)) == (404, "not_found"),
           "a v1 token signed with --secret-next is accepted")
    refused(a, "alice", example("alice", AUD, ISS, secret=S3),
            "bad_signature", "a retired secret")

    # -- refused ----------------------------------------------------------------
    head, payload, sig = tok.split(".")
    as_bob = json.loads(base64.urlsafe_b64decode(payload + "=="))
    as_bob["sub"] = "bob"
    refused(a, "bob", f"{head}.{b64(json.dumps(as_bob).encode())}.{sig}", "bad_signature",
            "alice's JWT with its sub changed to bob")
    flipped = sig[:10] + ("A" if sig[10] != "A" else "B") + sig[11:]
    refused(a, "alice", f"{head}.{payload}.{flipped}", "bad_signature", "a flipped signature")
    refused(a, "alice", example_cli("alice", "--aud", AUD, "--iss", ISS, "--ttl=-60"),
            "expired_token", "expired a minute ago (leeway 5 s)")
    refused(a, "alice", example("alice", "chat", ISS), "wrong_audience",
            "another audience")
    refused(a, "alice", example("alice", iss=ISS), "wrong_audience", "no audience")
    refused(a, "alice", example("alice", AUD, "https://evil.example"),
            "wrong_issuer", "another issuer")
    refused(a, "alice", example("alice", AUD), "wrong_issuer", "no issuer")
    now = int(time.time())
    good = {"sub": "alice", "exp": now + 60, "aud": AUD, "iss": ISS}
    unsigned = b64(b'{"alg":"none","typ":"JWT"}') + "." + b64(json.dumps(good).encode()) + "."
    refused(a, "alice", unsigned, "unsupported_algorithm", "alg none")
    refused(a, "alice", hand_signed({"alg": "HS512"}, good, digest=hashlib.sha512),
            "unsupported_algorithm", "alg HS512")
    refused(a, "alice", hand_signed({"alg": "none"}, good), "unsupported_algorithm",
            "alg none with a signature")
    refused(a, "alice", hand_signed({"alg": "HS256"}, dict(good, nbf=now + 600)),
            "token_not_yet_valid", "nbf in 10 minutes")
    refused(a, "alice", hand_signed({"alg": "HS256"}, dict(good, iat=now + 600)),
            "token_not_yet_valid", "iat in 10 minutes")
    refused(a, "alice", hand_signed({"alg": "HS256"}, dict(good, pad="x" * 3500)),
            "oversized_token", "a 5 KB token")
    refused(a, "alice", hand_signed({"alg": "HS256"}, {"sub": "alice", "aud": AUD, "iss": ISS}),
            "malformed_token", "no exp")
    refused(a, "alice", hand_signed({"alg": "HS256"}, dict(good, sub="a b")), "malformed_token",
            "a sub that is not a user id")
    refused(a, "alice", "", "missing_token", "an empty bearer")
    st, j = a.call("GET", "/v1/users/alice/tickets/t-none")
    expect((st, j.get("error")) == (401, "missing_token"), f"no Authorization: {st} {j}")
    # A refusal names the problem, never a secret.
    st, j = a.call("GET", "/v1/users/alice/tickets/t-none", unsigned)
    expect(set(j) == {"error", "detail"} and S1 not in j["detail"], f"the 401 body: {j}")
    # A token acts only for its sub.
    st, j = a.call("DELETE", "/v1/users/bob/tickets/t-1", tok)
    expect((st, j.get("error")) == (403, "forbidden"), f"alice's JWT on bob's path: {st} {j}")
    expect(a.upgrade("bob", tok) == 403, "alice's JWT on bob's WebSocket")
    expect(a.upgrade("alice", unsigned) == 401, "an alg none WebSocket upgrade")
    # Nothing refused changed anything: alice still waits with t-1.
    st, j = a.call("GET", "/v1/users/alice/tickets/t-1", tok)
    expect(st == 200 and j.get("state") == "queued", f"alice's ticket after the refusals: {j}")
finally:
    a.stop()

# A node without an audience, JWTs only.
b = node("--secret", S1, "--token-formats", "jwt")
try:
    expect(b.probe("alice", example("alice")) == (404, "not_found"),
           "no audience configured: a JWT without aud is accepted")
    refused(b, "alice", example("alice", AUD), "wrong_audience",
            "no audience configured: a JWT meant for one")
    refused(b, "erin", v1_token("erin", int(time.time()) + 60), "disabled_token_format",
            "--token-formats jwt: a v1 token")
finally:
    b.stop()

expect(seen == documented,
       f"the 401 names seen {sorted(seen)} are those docs/api.md documents {sorted(documented)}")
if failures:
    sys.exit(f"{len(failures)} failure(s)")
print(f"token_jwt_test: {len(seen)} refusals as documented, examples and PyJWT accepted")

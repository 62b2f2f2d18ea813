#!/usr/bin/env python3
"""Operations apart from users (issue 36, item 5), against a real matchd.

Usage: admin_listen_test.py MATCHD

With --admin-listen (a bare port: bound to 127.0.0.1), /healthz, /readyz,
/metrics and the console answer on the admin listener and not on the
public one; the API, /openapi.json and the demo answer on the public one
and not on the admin one (no WebSocket either). /metrics counts every HTTP
request by route template, method and status, with a latency histogram,
and a path a client invents never becomes a label. Without
--admin-listen everything stays on --listen.
"""
import json, os, re, signal, socket, subprocess, sys, tempfile, time
import urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mm_node import expect, failures, free_port  # noqa: E402

matchd = os.path.abspath(sys.argv[1])
SECRET = "admin-listen-secret-0123"
CONSOLE = "console-token-0123456789"




def v1_token(user):
    # matchctl signs as the host backend would.
    out = subprocess.run([os.path.join(os.path.dirname(matchd), "matchctl"), "--secret",
                          SECRET, "token", user],
                         capture_output=True, text=True, timeout=20)
    return out.stdout.strip()


def call(port, method, path, token=None, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def upgrade(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        return int(s.recv(4096).split(b" ")[1])


def start(*args):
    port = free_port()
    work = tempfile.mkdtemp(prefix="admin_listen_")
    log = os.path.join(work, "matchd.log")
    with open(log, "w") as f:
        proc = subprocess.Popen([matchd, "--listen", f"127.0.0.1:{port}", "--secret", SECRET,
                                 "--queues", "default,demo", *args], stdout=f, stderr=f)
    return proc, port, log


def wait_ready(port, proc, log):
    for _ in range(400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1)
            return
        except Exception:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    raise SystemExit("matchd did not become ready; see " + log)


admin_port = free_port()
proc, port, log = start("--admin-listen", str(admin_port), "--console-token", CONSOLE,
                        "--demo-queue", "demo")
try:
    wait_ready(admin_port, proc, log)
    expect(f"admin listener on http://127.0.0.1:{admin_port}" in open(log).read(),
           "a bare port binds the admin listener to 127.0.0.1")
    # -- the public listener: the API, the spec and the demo; no operations --
    for path in ("/healthz", "/readyz", "/metrics", "/console/", "/console/index.html",
                 "/console/console.js"):
        st, body = call(port, "GET", path)
        expect(st == 404 and "admin listener" in body, f"public {path}: {st} {body[:120]}")
    st, _ = call(port, "GET", "/v1/console/stats", CONSOLE)
    expect(st == 404, f"public console stats: {st}")
    for path in ("/openapi.json", "/console/demo.html", "/console/demo.js",
                 "/console/matchmaker.js", "/console/style.css"):
        st, _ = call(port, "GET", path)
        expect(st == 200, f"public {path}: {st}")
    st, body = call(port, "POST", "/v1/console/demo")
    expect(st == 200 and "token" in body, f"public demo token: {st}")
    tok = v1_token("alice")
    st, body = call(port, "POST", "/v1/users/alice/tickets", tok,
                    {"queue": "default", "ticket": "t-1"})
    expect(st == 200, f"a join on the public listener: {st} {body}")
    st, _ = call(port, "GET", "/v1/users/alice/tickets/t-1", tok)
    expect(st == 200, f"a read on the public listener: {st}")
    call(port, "GET", "/v1/users/alice/tickets/invented-ticket-name", tok)
    call(port, "GET", "/no/such/route/xyz")
    expect(upgrade(port, f"/v1/users/alice/events?access_token={tok}") == 101,
           "the events WebSocket on the public listener")
    # -- the admin listener: operations only --------------------------------
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/console/",
                 "/console/console.js"):
        st, _ = call(admin_port, "GET", path)
        expect(st == 200, f"admin {path}: {st}")
    st, _ = call(admin_port, "GET", "/v1/console/stats", CONSOLE)
    expect(st == 200, f"admin console stats: {st}")
    st, body = call(admin_port, "POST", "/v1/users/alice/tickets", tok,
                    {"queue": "default", "ticket": "t-2"})
    expect(st == 404 and "unknown_route" in body, f"a join on the admin listener: {st}")
    st, _ = call(admin_port, "POST", "/v1/console/demo")
    expect(st == 404, f"the demo on the admin listener: {st}")
    expect(upgrade(admin_port, f"/v1/users/alice/events?access_token={tok}") == 404,
           "no WebSocket on the admin listener")
    # -- per-route metrics ---------------------------------------------------
    st, text = call(admin_port, "GET", "/metrics")
    labels = {}
    for m in re.finditer(r'^mm_http_requests_total\{(.*)\} (\S+)$', text, re.M):
        kv = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        labels[(kv.get("route"), kv.get("method"), kv.get("status"))] = float(m.group(2))
    expect(labels.get(("/v1/users/{user}/tickets", "POST", "200")) == 1,
           f"the join counted by route, method, status: {labels}")
    expect(labels.get(("/v1/users/{user}/tickets/{ticket}", "GET", "200")) == 1,
           "the read counted under its template")
    expect(labels.get(("/v1/users/{user}/tickets/{ticket}", "GET", "404")) == 1,
           "the unknown ticket counted under its template")
    expect(labels.get(("unmatched", "GET", "404"), 0) >= 1, "an unknown path is 'unmatched'")
    expect(labels.get(("/healthz", "GET", "404"), 0) >= 1,
           "the public /healthz refusals counted under /healthz")
    expect("invented-ticket-name" not in text and "/no/such/route" not in text and
           "alice" not in text, "no path a client wrote is a label")
    buckets = re.findall(r'^mm_http_request_duration_seconds_bucket\{(.*)\} (\S+)$', text,
                         re.M)
    joins = [b for b in buckets if 'route="/v1/users/{user}/tickets"' in b[0]
             and 'method="POST"' in b[0]]
    # Two joins: the public one (200) and the admin listener's refusal (404).
    expect(len(joins) >= 10 and any('le="+Inf"' in b[0] and float(b[1]) == 2 for b in joins),
           f"the join's latency histogram: {joins[:3]}")
    expect(re.search(r'^mm_http_request_duration_seconds_sum\{.*route="/v1/users/\{user\}'
                     r'/tickets".*\} \S+$', text, re.M), "the histogram's sum")
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)

# Without --admin-listen, everything on --listen as before.
proc, port, log = start()
try:
    wait_ready(port, proc, log)
    for path in ("/healthz", "/metrics", "/openapi.json"):
        st, _ = call(port, "GET", path)
        expect(st == 200, f"one listener: {path}: {st}")
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)

# A bad --admin-listen is named at start.
for bad in ("nope", f"127.0.0.1:{port}x"):
    out = subprocess.run([matchd, "--secret", SECRET, "--admin-listen", bad],
                         capture_output=True, text=True, timeout=20)
    expect(out.returncode == 2 and "--admin-listen" in out.stdout + out.stderr,
           f"--admin-listen {bad}: rc {out.returncode}")

print(f"{0 if failures else 1} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)

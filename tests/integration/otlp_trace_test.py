#!/usr/bin/env python3
"""Traces of a match exported over OTLP (issue 36, item 5), real matchd.

Usage: otlp_trace_test.py MATCHD

A collector stand-in (an HTTP server taking OTLP/HTTP JSON on /v1/traces)
receives, for each of two matched users, one trace of five spans: match
(the root) and its children join, claim, commit, delivery, in time order,
naming the session and the queue. With --otlp-sample 0 nothing is sent; with
the collector down the users are matched all the same and the failure is
logged.
"""
import http.server, json, os, signal, socket, subprocess, sys, tempfile
import threading, time, urllib.error, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mm_node import expect, failures, free_port, matchd_node  # noqa: E402

matchd = os.path.abspath(sys.argv[1])
matchctl = os.path.join(os.path.dirname(matchd), "matchctl")
SECRET = "otlp-trace-secret-012345"




class collector:
    def __init__(self):
        self.bodies = []
        outer = self

        class handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n)
                ok = self.path == "/v1/traces" and \
                    self.headers.get("Content-Type") == "application/json"
                if ok:
                    outer.bodies.append(json.loads(body))
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self):
        out = []
        for b in self.bodies:
            for rs in b["resourceSpans"]:
                res = {a["key"]: a["value"]["stringValue"] for a in rs["resource"]["attributes"]}
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        out.append((res, s))
        return out


class node(matchd_node):
    def __init__(self, *args):
        log = os.path.join(tempfile.mkdtemp(prefix="otlp_"), "matchd.log")
        super().__init__(matchd, ["--secret", SECRET, "--node", "trace-node", *args], log)

    def call(self, method, path, user, body=None):
        tok = subprocess.run([matchctl, "--secret", SECRET, "token", user],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return super().call(method, path, tok, body)

    def match_two(self, a, b):
        self.call("POST", f"/v1/users/{a}/tickets", a, {"queue": "default", "ticket": "t-" + a})
        self.call("POST", f"/v1/users/{b}/tickets", b, {"queue": "default", "ticket": "t-" + b})
        for _ in range(100):
            st, j = self.call("GET", f"/v1/users/{a}/tickets/t-{a}", a)
            if j and j.get("state") == "matched":
                return j.get("session_id")
            time.sleep(0.05)
        return None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


col = collector()
n = node("--otlp-endpoint", f"http://127.0.0.1:{col.port}/v1/traces", "--otlp-sample", "1")
try:
    session = n.match_two("alice", "bob")
    expect(session, "alice and bob matched")
    t0 = time.time()
    while time.time() - t0 < 10 and len(col.spans()) < 10:
        time.sleep(0.2)
    spans = col.spans()
    expect(len(spans) == 10, f"two traces of five spans: {len(spans)}")
    by_trace = {}
    for res, s in spans:
        expect(res.get("service.name") == "matchd" and
               res.get("service.instance.id") == "trace-node", f"resource: {res}")
        by_trace.setdefault(s["traceId"], []).append(s)
    expect(len(by_trace) == 2, f"one trace per user: {len(by_trace)}")
    users = set()
    for trace, ss in by_trace.items():
        expect(len(trace) == 32 and all(len(s["spanId"]) == 16 for s in ss), "hex ids")
        named = {s["name"]: s for s in ss}
        expect(sorted(named) == ["claim", "commit", "delivery", "join", "match"],
               f"the spans: {sorted(named)}")
        if len(named) != 5:
            continue
        root = named["match"]
        attrs = {a["key"]: a["value"]["stringValue"] for a in root["attributes"]}
        users.add(attrs.get("enduser.id"))
        expect(attrs.get("mm.session_id") == session and attrs.get("mm.queue") == "default",
               f"the root names the session and queue: {attrs}")
        expect("parentSpanId" not in root, "the root has no parent")
        for k in ("join", "claim", "commit", "delivery"):
            expect(named[k].get("parentSpanId") == root["spanId"], f"{k} is the root's child")
        t = {k: (int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])) for k, s in named.items()}
        expect(all(a <= b for a, b in t.values()), f"every span starts before it ends: {t}")
        expect(t["join"][0] == t["match"][0] and t["delivery"][1] == t["match"][1],
               "the root spans the join's request to the delivery")
        expect(t["claim"][1] == t["commit"][0] and t["commit"][1] == t["delivery"][0],
               "claim, commit and delivery follow each other")
        expect(t["match"][0] <= t["claim"][0] + 10**9 and t["commit"][1] <= t["match"][1],
               f"claim and commit inside the match: {t}")
        expect(abs(t["match"][1] / 1e9 - time.time()) < 60, "wall-clock times")
    expect(users == {"alice", "bob"}, f"a trace for each user: {users}")
    for _ in range(50):  # counted once the collector's answer is read
        with urllib.request.urlopen(f"http://127.0.0.1:{n.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        if 'mm_trace_spans_exported_total{node="trace-node"} 10' in text:
            break
        time.sleep(0.1)
    expect('mm_trace_spans_exported_total{node="trace-node"} 10' in text,
           "the exported spans counted in /metrics")
finally:
    n.stop()

# Sampling 0: nothing sent.
col0 = collector()
n = node("--otlp-endpoint", f"http://127.0.0.1:{col0.port}/v1/traces", "--otlp-sample", "0")
try:
    expect(n.match_two("carol", "dave"), "carol and dave matched")
    time.sleep(2)
    expect(col0.spans() == [], "--otlp-sample 0 exports nothing")
finally:
    n.stop()

# The collector down: matches go on, the failure is logged.
n = node("--otlp-endpoint", f"http://127.0.0.1:{free_port()}/v1/traces", "--otlp-sample", "1")
try:
    expect(n.match_two("erin", "frank"), "matched while the collector is down")
    time.sleep(2.5)
    expect("traces not exported" in open(n.log).read(), "the failed export is logged")
finally:
    n.stop()

out = subprocess.run([matchd, "--secret", SECRET, "--otlp-endpoint", "ftp://x",
                      "--otlp-sample", "2"], capture_output=True, text=True, timeout=20)
expect(out.returncode == 2 and "--otlp-endpoint" in out.stdout + out.stderr and
       "--otlp-sample" in out.stdout + out.stderr, "bad --otlp-* values named")

print(f"{0 if failures else 1} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)

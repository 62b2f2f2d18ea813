#!/usr/bin/env python3
"""The invented-queue client of `bench/run queues` (bench/queues.sh).

User "atk-<tag>-u<i>" joins queue "atk-<tag>-q<i>" (i < --names), over
--conns keep-alive HTTP connections (one process each), at --rate joins/s
in all, pass after pass until the file --stop exists. Prints one line: the
joins sent, their answers by status and error name, joins/s.
"""
import argparse, base64, hashlib, hmac, http.client, json, multiprocessing
import os, sys, time


def token(secret, user, expiry):
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    body = f"v1.{b64(user.encode())}.{expiry}"
    sig = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{b64(sig)}"


def worker(a, k, out):
    expiry = int(time.time()) + 3600
    mine = range(k, a.names, a.conns)
    reqs = []
    for i in mine:
        user = f"atk-{a.tag}-u{i}"
        reqs.append((f"/v1/users/{user}/tickets",
                     json.dumps({"queue": f"atk-{a.tag}-q{i}", "ticket": "t1"}),
                     {"Authorization": "Bearer " + token(a.secret, user, expiry),
                      "Content-Type": "application/json"}))
    gap = a.conns / a.rate if a.rate > 0 else 0
    counts, sent = {}, 0
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
    t0 = time.monotonic()
    while not os.path.exists(a.stop):
        for path, body, headers in reqs:
            if gap:
                wait = t0 + sent * gap - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            try:
                conn.request("POST", path, body, headers)
                r = conn.getresponse()
                data = r.read()
                name = f"{r.status}"
                try:
                    name += " " + json.loads(data).get("error", "")
                except ValueError:
                    pass
            except (OSError, http.client.HTTPException) as e:
                name = "transport " + type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
            counts[name.strip()] = counts.get(name.strip(), 0) + 1
            sent += 1
            if os.path.exists(a.stop):
                break
    out.put((sent, counts, time.monotonic() - t0))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--secret", required=True)
    p.add_argument("--names", type=int, default=10000)
    p.add_argument("--conns", type=int, default=2)
    p.add_argument("--rate", type=float, default=2000)
    p.add_argument("--tag", default="x")
    p.add_argument("--stop", required=True)
    a = p.parse_args()
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(a, k, out))
             for k in range(a.conns)]
    for pr in procs:
        pr.start()
    total, counts, secs = 0, {}, 0.0
    for _ in procs:
        n, c, s = out.get()
        total += n
        secs = max(secs, s)
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
    for pr in procs:
        pr.join()
    answers = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"{total} joins of {a.names} invented names in {secs:.1f} s"
          f" ({total / max(secs, 1e-9):.0f}/s); answers {answers}")


if __name__ == "__main__":
    sys.exit(main())

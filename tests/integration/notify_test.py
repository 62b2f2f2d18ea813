#!/usr/bin/env python3
"""matchd under systemd's notification protocol, without systemd: the test
is the notify socket (a Unix datagram socket, as PID 1 would make it).

Usage: notify_test.py MATCHD

1. A node on the embedded stores with NOTIFY_SOCKET and WATCHDOG_USEC=300000:
   READY=1 arrives, and /readyz answers 200 by then; WATCHDOG=1 comes about
   every 150 ms (half of WATCHDOG_USEC); SIGTERM sends STOPPING=1 and the
   node exits 0.
2. A node whose queue store does not answer (--redis on a closed port):
   no READY=1 (it is not ready), a STATUS= naming the store, and the
   watchdog still pings (the process is alive; systemd must not kill it for
   a store outage).
"""
import os, signal, socket, subprocess, sys, tempfile, time, urllib.request


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start(matchd, work, name, extra):
    path = os.path.join(work, name + ".sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.05)
    port = free_port()
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="300000")
    env.pop("WATCHDOG_PID", None)
    log = open(os.path.join(work, name + ".log"), "w")
    proc = subprocess.Popen([matchd, "--listen", f"127.0.0.1:{port}",
                             "--secret", "notify-test-secret-0123456789"] + extra,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, sock, f"http://127.0.0.1:{port}"


def collect(sock, seconds, until=None):
    """[(time, message)] for `seconds`, or until `until(message)` holds."""
    out, end = [], time.time() + seconds
    while time.time() < end:
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            continue
        out.append((time.time(), msg))
        if until and until(msg):
            break
    return out


def ready_status(url):
    try:
        return urllib.request.urlopen(url + "/readyz", timeout=1).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return None


def main():
    matchd = sys.argv[1]
    work = tempfile.mkdtemp(prefix="notify_test_")
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    # 1. A ready node.
    proc, sock, url = start(matchd, work, "ready", [])
    try:
        got = collect(sock, 10, lambda m: "READY=1" in m)
        readies = [m for _, m in got if "READY=1" in m.split("\n")]
        check(len(readies) == 1, f"READY=1 not received: {got}")
        if readies:
            check(ready_status(url) == 200, "READY=1 came before /readyz answers 200")
        pings = collect(sock, 1.5)
        wd = [t for t, m in pings if m == "WATCHDOG=1"]
        check(len(wd) >= 5, f"{len(wd)} WATCHDOG=1 in 1.5 s (want about 10)")
        if len(wd) >= 2:
            gap = (wd[-1] - wd[0]) / (len(wd) - 1)
            check(0.08 < gap < 0.3, f"watchdog every {gap:.3f} s, want about 0.15")
        check(not any("READY=1" in m for _, m in pings), "READY=1 sent twice")
        proc.send_signal(signal.SIGTERM)
        after = collect(sock, 10, lambda m: "STOPPING=1" in m)
        check(any("STOPPING=1" in m.split("\n") for _, m in after),
              f"STOPPING=1 not received after SIGTERM: {after}")
        check(proc.wait(timeout=20) == 0, f"matchd exited {proc.returncode}")
        print(f"ready node: READY=1, {len(wd)} watchdog pings in 1.5 s, STOPPING=1, exit 0")
    finally:
        if proc.poll() is None:
            proc.kill()
        sock.close()

    # 2. A node whose queue store does not answer.
    closed = free_port()
    proc, sock, url = start(matchd, work, "unready", ["--redis", f"127.0.0.1:{closed}"])
    try:
        got = collect(sock, 2.5)
        msgs = [m for _, m in got]
        check(not any("READY=1" in m for m in msgs), f"READY=1 from a node that is not ready")
        check(any(m.startswith("STATUS=not ready") and "queue store" in m for m in msgs),
              f"no STATUS naming the queue store: {msgs[:5]}")
        wd = [m for m in msgs if m == "WATCHDOG=1"]
        check(len(wd) >= 5, f"{len(wd)} watchdog pings in 2.5 s from a live, unready node")
        check(ready_status(url) == 503, "/readyz of the unready node is not 503")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        print(f"unready node: no READY=1, STATUS names the store, {len(wd)} watchdog pings")
    finally:
        if proc.poll() is None:
            proc.kill()
        sock.close()

    for f in failures:
        print("FAIL:", f)
    print(f"notify: {len(failures)} failures (logs in {work})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

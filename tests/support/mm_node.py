"""What the python integration tests share: their list of failures, a free
loopback port, and a matchd started on one and waited for.

    sys.path.insert(0, ".../tests/support"); from mm_node import ...
"""
import json, os, signal, socket, subprocess, time, urllib.error, urllib.request

failures = []


def expect(cond, what):
    """Records (and prints) a failed check; the test goes on."""
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class matchd_node:
    """matchd on 127.0.0.1:<free port> with `args`, its output in `log`;
    waits up to 20 s for /readyz. A node that does not start raises
    SystemExit unless `expect_start` is False (then `ready` is False)."""

    def __init__(self, matchd, args, log, expect_start=True):
        self.port = free_port()
        self.log = log
        with open(log, "w") as f:
            self.proc = subprocess.Popen([matchd, "--listen", f"127.0.0.1:{self.port}", *args],
                                         stdout=f, stderr=f)
        self.ready = False
        for _ in range(400):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1)
                self.ready = True
                return
            except Exception:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        if expect_start:
            raise SystemExit("matchd did not become ready; see " + log)

    def output(self):
        return open(self.log).read()

    def call(self, method, path, token=None, body=None):
        """(status, JSON body) of one request, with a bearer token if given."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
        if token is not None:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def probe(self, user, token):
        """Status and error name of reading a ticket the user does not have:
        404 not_found means the token was accepted."""
        st, j = self.call("GET", f"/v1/users/{user}/tickets/t-none", token)
        return st, (j or {}).get("error")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)

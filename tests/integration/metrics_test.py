#!/usr/bin/env python3
"""matchd's /metrics against the Prometheus text exposition format (0.0.4)
and the project's conventions, and against the list in docs/matchd.md.

Usage:
  metrics_test.py format MATCHD DOC [PROMTOOL]
      one node on the embedded stores: one match, then /metrics parsed by a
      strict parser (below) and linted by `promtool check metrics`; names,
      types, labels and units; every metric of the exposition is in the
      "Metrics" table of DOC and every one there is exposed.
  metrics_test.py lease MATCHD REDIS_DIR
      two nodes on one Redis: the depth of a shared queue is exported by
      exactly one of them (sum() across nodes is the real depth), and by the
      other within a few seconds after the reporter is SIGKILLed.
  metrics_test.py selftest
      the parser refuses what it must refuse (each case a named error).
"""
import base64, hashlib, hmac, json, math, os, re, signal, socket, subprocess
import sys, tempfile, time, urllib.request

# -- a strict parser of the text format ------------------------------------

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
# Units that are not base units (Prometheus: seconds, bytes, ratios).
NON_BASE = {"ms", "msec", "millis", "milliseconds", "us", "usec", "micros",
            "microseconds", "ns", "nanoseconds", "minutes", "hours", "days",
            "kb", "mb", "gb", "kib", "mib", "gib", "kilobytes", "megabytes",
            "gigabytes", "percent", "pct", "bits"}


class FormatError(Exception):
    pass


def parse_value(text, where):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise FormatError(f"{where}: bad value {text!r}")
    return float(text)


def parse_labels(text, pos, where):
    """Parses `{a="x",b="y"}` from text[pos] == '{'; returns (dict, end)."""
    labels = {}
    pos += 1
    while True:
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        m = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*").match(text, pos)
        if not m:
            raise FormatError(f"{where}: bad label name at {text[pos:]!r}")
        name = m.group(0)
        if name.startswith("__"):
            raise FormatError(f"{where}: reserved label name {name}")
        if name in labels:
            raise FormatError(f"{where}: label {name} given twice")
        pos = m.end()
        if text[pos:pos + 2] != '="':
            raise FormatError(f"{where}: label {name} without =\"value\"")
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise FormatError(f"{where}: unterminated label value")
            c = text[pos]
            if c == "\\":
                nxt = text[pos + 1:pos + 2]
                if nxt not in ("\\", '"', "n"):
                    raise FormatError(f"{where}: bad escape \\{nxt} in a label value")
                value.append("\n" if nxt == "n" else nxt)
                pos += 2
            elif c == '"':
                pos += 1
                break
            elif c == "\n":
                raise FormatError(f"{where}: raw newline in a label value")
            else:
                value.append(c)
                pos += 1
        labels[name] = "".join(value)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            continue
        else:
            raise FormatError(f"{where}: expected , or }} after label {name}")


def family_of(sample, types):
    """The family a sample name belongs to (histogram suffixes stripped)."""
    for suffix in ("_bucket", "_sum", "_count"):
        if sample.endswith(suffix):
            base = sample[: -len(suffix)]
            if types.get(base) in ("histogram", "summary"):
                return base
    return sample


def parse(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}."""
    if text and not text.endswith("\n"):
        raise FormatError("the exposition does not end with a newline")
    families, types, order = {}, {}, []
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {n}"
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                kind, name = parts[1], parts[2]
                rest = parts[3] if len(parts) > 3 else ""
                if not NAME.match(name):
                    raise FormatError(f"{where}: bad metric name {name!r}")
                fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
                if kind == "HELP":
                    if fam["help"] is not None:
                        raise FormatError(f"{where}: second HELP for {name}")
                    if re.search(r"\\[^\\n]", rest.replace("\\\\", "")):
                        raise FormatError(f"{where}: bad escape in HELP of {name}")
                    fam["help"] = rest
                else:
                    if rest not in TYPES:
                        raise FormatError(f"{where}: bad type {rest!r} for {name}")
                    if fam["type"] is not None:
                        raise FormatError(f"{where}: second TYPE for {name}")
                    if fam["samples"]:
                        raise FormatError(f"{where}: TYPE of {name} after its samples")
                    fam["type"] = rest
                    types[name] = rest
                if name != current:
                    if name in order:
                        raise FormatError(f"{where}: {name} is not contiguous")
                    order.append(name)
                    current = name
            continue
        m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(line)
        if not m:
            raise FormatError(f"{where}: bad sample line {line!r}")
        sample = m.group(0)
        pos = m.end()
        labels = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = parse_labels(line, pos, where)
        rest = line[pos:]
        if not rest.startswith(" "):
            raise FormatError(f"{where}: no space before the value: {line!r}")
        fields = rest.split()
        if len(fields) not in (1, 2):
            raise FormatError(f"{where}: junk after the value: {line!r}")
        value = parse_value(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise FormatError(f"{where}: bad timestamp {fields[1]!r}")
        fam_name = family_of(sample, types)
        if fam_name != current:
            if fam_name in order:
                raise FormatError(f"{where}: samples of {fam_name} are not contiguous")
            order.append(fam_name)
            current = fam_name
        fam = families.setdefault(fam_name, {"type": None, "help": None, "samples": []})
        fam["samples"].append((sample, labels, value))
    for name, fam in families.items():
        check_family(name, fam)
    return families


def check_family(name, fam):
    t = fam["type"] or "untyped"
    if fam["help"] is None or not fam["help"].strip():
        raise FormatError(f"{name}: no HELP")
    if fam["type"] is None:
        raise FormatError(f"{name}: no TYPE")
    seen = set()
    for sample, labels, value in fam["samples"]:
        key = (sample, tuple(sorted(labels.items())))
        if key in seen:
            raise FormatError(f"{name}: series {sample}{labels} given twice")
        seen.add(key)
        if t != "histogram" and sample != name:
            raise FormatError(f"{name}: sample {sample} in a {t} family")
    if t == "counter":
        if not name.endswith("_total"):
            raise FormatError(f"{name}: a counter's name must end in _total")
        for _, _, v in fam["samples"]:
            if not v >= 0:
                raise FormatError(f"{name}: counter value {v} is not >= 0")
    elif name.endswith("_total"):
        raise FormatError(f"{name}: _total is for counters, this is a {t}")
    if t != "histogram" and re.search(r"_(bucket|sum|count)\Z", name):
        raise FormatError(f"{name}: _bucket/_sum/_count are histogram suffixes")
    for token in name.split("_"):
        if token.lower() in NON_BASE:
            raise FormatError(f"{name}: unit {token!r} is not a base unit (seconds, bytes)")
    if t == "histogram":
        check_histogram(name, fam)


def check_histogram(name, fam):
    groups = {}
    for sample, labels, value in fam["samples"]:
        base = {k: v for k, v in labels.items() if k != "le"}
        g = groups.setdefault(tuple(sorted(base.items())),
                              {"buckets": [], "sum": None, "count": None})
        if sample == name + "_bucket":
            if "le" not in labels:
                raise FormatError(f"{name}: a bucket without le")
            g["buckets"].append((parse_value(labels["le"], name + " le"), value))
        elif sample == name + "_sum":
            if "le" in labels:
                raise FormatError(f"{name}_sum with an le label")
            g["sum"] = value
        elif sample == name + "_count":
            if "le" in labels:
                raise FormatError(f"{name}_count with an le label")
            g["count"] = value
        else:
            raise FormatError(f"{name}: sample {sample} in a histogram")
    for key, g in groups.items():
        b = g["buckets"]
        if not b:
            raise FormatError(f"{name}{dict(key)}: no buckets")
        les = [le for le, _ in b]
        if les != sorted(les) or len(set(les)) != len(les):
            raise FormatError(f"{name}{dict(key)}: le not strictly increasing")
        if les[-1] != math.inf:
            raise FormatError(f"{name}{dict(key)}: no le=\"+Inf\" bucket")
        counts = [c for _, c in b]
        if any(c2 < c1 for c1, c2 in zip(counts, counts[1:])):
            raise FormatError(f"{name}{dict(key)}: buckets not cumulative")
        if g["count"] is None or g["sum"] is None:
            raise FormatError(f"{name}{dict(key)}: _sum or _count missing")
        if g["count"] != counts[-1]:
            raise FormatError(f"{name}{dict(key)}: _count {g['count']} != +Inf bucket {counts[-1]}")
        if g["count"] > 0 and not g["sum"] >= 0:
            raise FormatError(f"{name}{dict(key)}: negative _sum")


def selftest():
    good = ("# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"q\\\"\\\\\\n\"} 3\n"
            "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"0.1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n"
            "h_seconds_sum 0.3\nh_seconds_count 2\n")
    fams = parse(good)
    assert fams["a_total"]["samples"][0][1]["x"] == 'q"\\\n', fams
    bad = {
        "counter without _total": "# HELP a A.\n# TYPE a counter\na 1\n",
        "gauge with _total": "# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n",
        "milliseconds": "# HELP lag_ms L.\n# TYPE lag_ms gauge\nlag_ms 1\n",
        "no HELP": "# TYPE a gauge\na 1\n",
        "no TYPE": "# HELP a A.\na 1\n",
        "bad escape": "# HELP a A.\n# TYPE a gauge\na{x=\"\\t\"} 1\n",
        "bad label name": "# HELP a A.\n# TYPE a gauge\na{1x=\"\"} 1\n",
        "reserved label": "# HELP a A.\n# TYPE a gauge\na{__x=\"\"} 1\n",
        "bad value": "# HELP a A.\n# TYPE a gauge\na 1,5\n",
        "duplicate series": "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
        "not contiguous": "# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\na{x=\"2\"} 1\n",
        "no +Inf": "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
        "count != +Inf": "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
        "not cumulative": "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",
        "no newline at end": "# HELP a A.\n# TYPE a gauge\na 1",
        "unterminated": "# HELP a A.\n# TYPE a gauge\na{x=\"1} 1\n",
    }
    for what, text in bad.items():
        try:
            parse(text)
        except FormatError:
            continue
        raise AssertionError(f"the parser accepted: {what}")
    print(f"selftest: {len(bad)} malformed expositions refused")


# -- docs/matchd.md's table ------------------------------------------------

def documented(doc):
    """{name: (type, set of labels)} from the table under '## Metrics'."""
    text = open(doc).read()
    m = re.search(r"^## Metrics\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        raise SystemExit(f"{doc}: no '## Metrics' section")
    out = {}
    for row in re.findall(r"^\| `([a-z_:]+)` \| (\w+) \| ([^|]*) \|", m.group(1), re.M):
        name, t, labels = row
        if name in out:
            raise SystemExit(f"{doc}: {name} listed twice")
        out[name] = (t, {l.strip(" `") for l in labels.split(",") if l.strip(" `-")})
    return out


# -- a real matchd ---------------------------------------------------------

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(secret, user):
    body = "v1." + b64url(user.encode()) + "." + str(int(time.time()) + 3600)
    return body + "." + b64url(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest())


class Node:
    def __init__(self, matchd, args, work, name="node-1"):
        self.port, self.secret = free_port(), "metrics-test-secret-0123456789"
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = os.path.join(work, name + ".log")
        self.proc = subprocess.Popen(
            [matchd, "--listen", f"127.0.0.1:{self.port}", "--secret", self.secret,
             "--node", name] + args,
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                urllib.request.urlopen(self.url + "/readyz", timeout=1)
                return
            except Exception:
                time.sleep(0.05)
        raise SystemExit(f"{name} not ready:\n" + open(self.log).read())

    def request(self, method, path, user=None, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
        if user:
            req.add_header("Authorization", "Bearer " + token(self.secret, user))
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def join(self, user, queue, ticket="t-1"):
        status, body = self.request("POST", f"/v1/users/{user}/tickets", user,
                                    {"queue": queue, "ticket": ticket})
        if status != 200:
            raise SystemExit(f"join of {user}: {status} {body}")
        return json.loads(body)

    def metrics(self):
        status, body = self.request("GET", "/metrics")
        if status != 200:
            raise SystemExit(f"/metrics: {status}")
        return body

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)


def value(fams, name, **labels):
    """The value of the first series `name` with `labels` (None: none)."""
    samples = [x for f in fams.values() for x in f["samples"]]
    for sample, l, v in samples:
        if sample == name and all(l.get(k) == x for k, x in labels.items()):
            return v
    return None


def check(cond, what, failures):
    if not cond:
        failures.append(what)


def run_format(matchd, doc, promtool):
    failures = []
    work = tempfile.mkdtemp(prefix="metrics_test_")
    node = Node(matchd, ["--queues", "default,voice",
                 # the trace counters exist only with an exporter
                 "--otlp-endpoint", "http://127.0.0.1:9/v1/traces", "--otlp-sample", "0"], work)
    try:
        alice = node.join("alice", "default")
        bob = node.join("bob", "default")
        for _ in range(100):  # both sides see the match
            _, a = node.request("GET", "/v1/users/alice/tickets/t-1", "alice")
            _, b = node.request("GET", "/v1/users/bob/tickets/t-1", "bob")
            if '"matched"' in a and '"matched"' in b:
                break
            time.sleep(0.05)
        node.request("GET", "/no-such-route")  # a 404 for mm_http_requests_total
        # A sweep (every 1 s) and a lease round (every 1 s): the depth.
        for _ in range(50):
            text = node.metrics()
            if 'mm_queue_depth{queue="default"' in text:
                break
            time.sleep(0.1)
    finally:
        node.stop()
        check(node.proc.returncode == 0, f"matchd exited {node.proc.returncode}", failures)
    open(os.path.join(work, "metrics.txt"), "w").write(text)
    try:
        fams = parse(text)
    except FormatError as e:
        raise SystemExit(f"/metrics does not parse: {e}\n(see {work}/metrics.txt)")
    if promtool:
        lint = subprocess.run([promtool, "check", "metrics"], input=text,
                              capture_output=True, text=True)
        check(lint.returncode == 0, "promtool check metrics: " + lint.stdout + lint.stderr,
              failures)
    # Names: the project's prefix, or the standard process_ set.
    for name in fams:
        check(name.startswith("mm_") or name.startswith("process_"),
              f"{name}: neither mm_ nor process_", failures)
        for _, labels, _ in fams[name]["samples"]:
            check(labels.get("node") == "node-1", f"{name}: series without node", failures)
    # The list in the docs is the exposition, both ways, with types and labels.
    docs = documented(doc)
    for name in sorted(set(fams) - set(docs)):
        failures.append(f"{name}: exposed but not in docs/matchd.md")
    for name in sorted(set(docs) - set(fams)):
        failures.append(f"{name}: in docs/matchd.md but not exposed")
    for name in sorted(set(docs) & set(fams)):
        t, labels = docs[name]
        check(t == fams[name]["type"], f"{name}: docs say {t}, exposed {fams[name]['type']}",
              failures)
        got = set()
        for _, l, _ in fams[name]["samples"]:
            got |= set(l) - {"le"}
        if fams[name]["samples"]:
            check(got == labels, f"{name}: labels {sorted(got)}, docs {sorted(labels)}",
                  failures)
    # What the one match and the requests must show.
    check(value(fams, "mm_matches_total") == 1, "mm_matches_total != 1", failures)
    check(value(fams, "mm_time_to_match_seconds_count", queue="default") == 2,
          "mm_time_to_match_seconds_count{queue=default} != 2 (both users)", failures)
    s = value(fams, "mm_time_to_match_seconds_sum", queue="default")
    check(s is not None and 0 < s < 10, f"mm_time_to_match_seconds_sum = {s}", failures)
    check(value(fams, "mm_queue_depth", queue="default") == 0,
          "a single node reports its queue's depth (0)", failures)
    check(value(fams, "mm_ready") == 1, "mm_ready != 1", failures)
    check(value(fams, "mm_http_requests_total", status="404") == 1,
          "mm_http_requests_total{status=404} != 1", failures)
    info = [l for _, l, _ in fams["mm_build_info"]["samples"]]
    check(len(info) == 1 and re.fullmatch(r"\d+\.\d+\.\d+", info[0].get("version", ""))
          and re.fullmatch(r"[0-9a-f]{7,40}|unknown", info[0].get("commit", "")),
          f"mm_build_info labels {info}", failures)
    start = value(fams, "process_start_time_seconds")
    check(start is not None and abs(time.time() - start) < 120,
          f"process_start_time_seconds {start} is not about now", failures)
    rss = value(fams, "process_resident_memory_bytes")
    check(rss is not None and 1e6 < rss < 8e9, f"process_resident_memory_bytes {rss}", failures)
    fds = value(fams, "process_open_fds")
    check(fds is not None and 3 <= fds < 10000, f"process_open_fds {fds}", failures)
    cpu = value(fams, "process_cpu_seconds_total")
    check(cpu is not None and 0 < cpu < 600, f"process_cpu_seconds_total {cpu}", failures)
    lag = value(fams, "mm_outbox_lag_seconds")
    check(lag is not None and 0 <= lag < 60, f"mm_outbox_lag_seconds {lag}", failures)
    for f in failures:
        print("FAIL:", f)
    print(f"format: {len(fams)} families, {sum(len(f['samples']) for f in fams.values())} "
          f"series, {len(docs)} documented; {len(failures)} failures")
    return 1 if failures else 0


def run_lease(matchd, redis_dir):
    failures = []
    work = tempfile.mkdtemp(prefix="metrics_lease_")
    redis = "127.0.0.1:" + open(os.path.join(redis_dir, "port")).read().strip()
    queue = "lease" + str(os.getpid())
    args = ["--redis", redis, "--queues", queue]
    a = Node(matchd, args, work, "node-a")
    b = Node(matchd, args, work, "node-b")
    try:
        # Both brokers know the queue (a join each), one user waits in it.
        b.join("bea", queue)
        b.request("DELETE", "/v1/users/bea/tickets/t-1", "bea")
        a.join("ada", queue)
        def depths():
            out = {}
            for n in (a, b):
                if n.proc.poll() is None:
                    out[n] = value(parse(n.metrics()), "mm_queue_depth", queue=queue)
            return out
        d = {}
        for _ in range(60):
            d = depths()
            if sum(1 for v in d.values() if v is not None) == 1 and \
                    sum(v for v in d.values() if v is not None) == 1:
                break
            time.sleep(0.1)
        reporters = [n for n, v in d.items() if v is not None]
        check(len(reporters) == 1, f"reporters of {queue}: {len(reporters)}, want 1", failures)
        check(sum(v for v in d.values() if v is not None) == 1,
              f"sum of mm_queue_depth across nodes {d} != 1", failures)
        # Never two reporters at once, sampled for a few seconds.
        for _ in range(15):
            d = depths()
            check(sum(1 for v in d.values() if v is not None) <= 1,
                  f"two nodes report {queue} at once", failures)
            time.sleep(0.1)
        if len(reporters) == 1:
            gone = reporters[0]
            other = b if gone is a else a
            gone.stop(signal.SIGKILL)  # no drain: its lease lapses (3 s)
            t0 = time.time()
            took = None
            while time.time() - t0 < 8:
                if value(parse(other.metrics()), "mm_queue_depth", queue=queue) is not None:
                    took = time.time() - t0
                    break
                time.sleep(0.1)
            check(took is not None, "the other node never reported the depth", failures)
            print(f"lease: the other node reports the depth {took and round(took, 2)} s "
                  f"after the reporter was killed")
    finally:
        a.stop(); b.stop()
    for f in failures:
        print("FAIL:", f)
    print(f"lease: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "selftest":
        selftest()
        sys.exit(0)
    if mode == "format":
        selftest()
        promtool = sys.argv[4] if len(sys.argv) > 4 else ""
        if not promtool or promtool.endswith("NOTFOUND"):
            raise SystemExit("promtool not found (deploy/setup.sh installs the prometheus package)")
        sys.exit(run_format(sys.argv[2], sys.argv[3], promtool))
    if mode == "lease":
        sys.exit(run_lease(sys.argv[2], sys.argv[3]))
    raise SystemExit(__doc__)

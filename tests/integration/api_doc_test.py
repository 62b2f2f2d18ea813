#!/usr/bin/env python3
"""Runs the tested shell blocks of docs/api.md against a real matchd.

Usage: api_doc_test.py DOC MATCHD MATCHCTL_DIR
Every JSON line the block prints must match the `# {...}` line written under
its command, in order ("..." matches any value). A failing command fails.
"""
import json, os, re, shlex, signal, socket, subprocess, sys, tempfile, time, urllib.request

doc, matchd, matchctl_dir = (os.path.abspath(p) for p in sys.argv[1:4])
text = open(doc).read()
# <!-- tested: NAME --> or <!-- tested: NAME; matchd ARGS --> (ARGS: the
# node's options besides --listen and --secret, e.g. the queues it serves).
blocks = re.findall(r"<!-- tested: (\w+)(?:; matchd ([^>]*?))? -->\n```sh\n(.*?)```",
                    text, re.S)
if not blocks:
    sys.exit("no tested blocks in " + doc)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def matches(expected, got):
    if expected == "...":
        return True
    if isinstance(expected, dict):
        return isinstance(got, dict) and set(expected) == set(got) and \
            all(matches(v, got[k]) for k, v in expected.items())
    return expected == got

failures = 0
for name, margs, script in blocks:
    expected = [json.loads(l[2:]) for l in script.splitlines() if l.startswith("# {")]
    port, secret = free_port(), "doc-test-secret-0123456789"
    work = tempfile.mkdtemp(prefix="api_doc_")
    log = open(os.path.join(work, "matchd.log"), "w")
    node = subprocess.Popen([matchd, "--listen", f"127.0.0.1:{port}", "--secret", secret]
                            + shlex.split(margs),
                            stdout=log, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/readyz", timeout=1); break
            except Exception:
                time.sleep(0.05)
        env = dict(os.environ, MATCHD_URL=url, MATCHD_SECRET=secret,
                   PATH=matchctl_dir + ":" + os.environ["PATH"])
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                             capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            print(f"{name}: the block failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
            failures += 1
            continue
        got = []
        for line in run.stdout.splitlines():
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict):
                got.append(v)
        if len(got) != len(expected):
            print(f"{name}: {len(got)} JSON lines, the page shows {len(expected)}:\n{run.stdout}")
            failures += 1
            continue
        for i, (e, g) in enumerate(zip(expected, got)):
            if not matches(e, g):
                print(f"{name}: line {i + 1}: the page shows {json.dumps(e)}, got {json.dumps(g)}")
                failures += 1
        print(f"{name}: {len(got)} answers as documented")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=20)
sys.exit(1 if failures else 0)

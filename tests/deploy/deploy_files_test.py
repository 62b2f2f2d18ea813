#!/usr/bin/env python3
"""The operations files of deploy/ against the metrics matchd exports.

Usage: deploy_files_test.py SOURCE_DIR PROMTOOL MATCHD

- deploy/prometheus/*.yml pass `promtool check rules`, and the alerts' unit
  tests (tests/deploy/alerts_test.yml) pass `promtool test rules`;
- deploy/grafana/matchd-dashboard.json parses, has the panels the issue asks
  for, and every query in it is valid PromQL (promtool checks each one as a
  recording rule);
- every metric an alert or a panel names is in docs/matchd.md's list;
- deploy/docker-compose.yml builds the image it runs from a Dockerfile that
  exists (no image that nothing builds), and that Dockerfile's run-time
  stage installs the Debian package of every library MATCHD links directly
  (readelf NEEDED -> ldd -> dpkg -S); tests/deploy/container_test.sh builds
  and runs that image with Podman;
- every compose service restarts, secrets are files (no secret or password
  in an environment variable), Prometheus' config passes `promtool check
  config` and scrapes every node, Grafana is provisioned with it and the
  dashboard.
"""
import json, os, re, subprocess, sys, tempfile

src, promtool, matchd = sys.argv[1], sys.argv[2], sys.argv[3]
if not os.path.exists(promtool):
    sys.exit(f"promtool not found ({promtool}): deploy/setup.sh installs the prometheus package")
sys.path.insert(0, os.path.join(src, "tests", "integration"))
from metrics_test import documented  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(args, cwd=None):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


docs = documented(os.path.join(src, "docs", "matchd.md"))
known = set(docs)
for name, (t, _) in docs.items():
    if t == "histogram":
        known |= {name + "_bucket", name + "_sum", name + "_count"}
known.add("up")  # Prometheus' own


def metric_names(expr):
    """Names of series an expression selects (mm_*, process_*, up)."""
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values are not names
    names = set(re.findall(r"\b((?:mm|process)_[a-z0-9_]+)\b", expr))
    if re.search(r"\bup\s*\{", expr):
        names.add("up")
    return names


# -- alert rules -----------------------------------------------------------
rules_dir = os.path.join(src, "deploy", "prometheus")
rule_files = sorted(os.path.join(rules_dir, f) for f in os.listdir(rules_dir)
                    if f.endswith(".yml") and f != "prometheus.yml")  # its config
check(rule_files, "no rule files in deploy/prometheus")
for f in rule_files:
    rc, out = run([promtool, "check", "rules", f])
    check(rc == 0, f"promtool check rules {f}: {out}")
    for expr in re.findall(r"expr: \|\n((?:\s{10,}.*\n)+)|expr: (.*)\n", open(f).read()):
        e = expr[0] or expr[1]
        for name in metric_names(e):
            check(name in known, f"{os.path.basename(f)}: {name} is not a documented metric")
rc, out = run([promtool, "test", "rules", "alerts_test.yml"], cwd=os.path.join(src, "tests", "deploy"))
check(rc == 0, f"promtool test rules: {out}")
alerts = re.findall(r"- alert: (\w+)", "".join(open(f).read() for f in rule_files))
for want in ("MatchmakerNoMatchesWhileUsersWait", "MatchmakerOutboxLag",
             "MatchmakerConflictRate", "MatchmakerNodeNotReady"):
    check(want in alerts, f"no alert {want}")
tested = open(os.path.join(src, "tests", "deploy", "alerts_test.yml")).read()
for a in alerts:
    check(f"alertname: {a}" in tested, f"alert {a} has no promtool unit test")

# -- the dashboard -----------------------------------------------------------
dash_path = os.path.join(src, "deploy", "grafana", "matchd-dashboard.json")
dash = json.load(open(dash_path))
panels = dash.get("panels", [])
titles = " | ".join(p.get("title", "") for p in panels).lower()
for want in ("queue depth", "matches per second", "time to match", "outbox lag",
             "conflicts", "sessions", "readiness"):
    check(want in titles, f"dashboard: no panel about {want!r}")
exprs = []
for p in panels:
    check(p.get("targets"), f"dashboard panel {p.get('title')!r} has no query")
    for t in p.get("targets", []):
        exprs.append((p.get("title"), t["expr"]))
for v in dash.get("templating", {}).get("list", []):
    q = v.get("query")
    if isinstance(q, dict):
        q = q.get("query", "")
    m = re.match(r"label_values\((\w+),", q or "")
    if m:
        check(m.group(1) in known, f"dashboard variable {v['name']}: {m.group(1)} not documented")
with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as tmp:
    tmp.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, (title, e) in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$queue", ".*").replace("$node", ".*")
        tmp.write(f"      - record: dashboard:q{i}\n        expr: {json.dumps(e)}\n")
        for name in metric_names(e):
            check(name in known, f"dashboard {title!r}: {name} is not a documented metric")
rc, out = run([promtool, "check", "rules", tmp.name])
check(rc == 0, f"dashboard queries are not valid PromQL: {out}")
os.unlink(tmp.name)
check(any("histogram_quantile" in e and "mm_time_to_match_seconds_bucket" in e for _, e in exprs),
      "dashboard: no time-to-match percentile from the histogram")

# -- the compose file --------------------------------------------------------
compose_path = os.path.join(src, "deploy", "docker-compose.yml")
if os.path.exists(compose_path):
    compose = open(compose_path).read()
    for image in set(re.findall(r"image: (matchmaker/\S+)", compose)):
        check("build:" in compose, f"compose runs {image} but builds nothing")
    for ctx, dockerfile in re.findall(r"context: (\S+)\s+dockerfile: (\S+)", compose):
        path = os.path.normpath(os.path.join(src, "deploy", ctx, dockerfile))
        check(os.path.exists(path), f"compose builds from {path}, which does not exist")
    check(re.search(r"context: \S+\s+dockerfile: \S+", compose), "compose: no build context")
    dockerfile = open(os.path.join(src, "deploy", "Dockerfile")).read()
    runtime = dockerfile[dockerfile.rindex("\nFROM "):]
    rc, out = run(["readelf", "-d", matchd])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    check(rc == 0 and needed, f"readelf -d {matchd}: {out[:200]}")
    rc, out = run(["ldd", matchd])
    where = dict(re.findall(r"^\s*(\S+) => (/\S+)", out, re.M))
    base = {"libc6", "libstdc++6", "libgcc-s1"}  # in debian:12-slim already
    paths = {}
    for lib in needed:
        if lib not in where:
            failures.append(f"ldd does not resolve {lib}")
        else:
            paths[os.path.realpath(where[lib])] = lib
    # One dpkg -S for all (each call reads every package's file list).
    # (merged /usr: dpkg may know a library by its /lib path)
    alias = {p.replace("/usr/lib/", "/lib/", 1): p for p in paths if p.startswith("/usr/lib/")}
    rc, out = run(["dpkg", "-S"] + sorted(paths) + sorted(alias))
    owners = {}
    for line in out.splitlines():
        m = re.match(r"([^:\s]+)(?::\w+)?: (/\S+)$", line)
        if m:
            owners[alias.get(m.group(2), m.group(2))] = m.group(1)
    for path, lib in sorted(paths.items()):
        pkg = owners.get(path, "")
        check(pkg, f"no Debian package owns {path} ({lib})")
        if pkg and pkg not in base:
            check(re.search(r"\b" + re.escape(pkg) + r"\b", runtime),
                  f"deploy/Dockerfile's run-time stage lacks {pkg} (for {lib})")
    print(f"Dockerfile: {len(paths)} libraries matchd links, owned by "
          f"{len(set(owners.values()) - base)} packages outside the base image, all installed")

# -- compose: restarts, secrets from files, Prometheus and Grafana ------------
if os.path.exists(compose_path):
    import yaml
    doc = yaml.safe_load(open(compose_path))
    services = doc.get("services", {})
    declared = doc.get("secrets", {})
    for name, svc in services.items():
        check(svc.get("restart") in ("always", "unless-stopped", "on-failure"),
              f"compose: service {name} has no restart policy")
        for k, v in (svc.get("environment") or {}).items():
            if re.search(r"SECRET|PASSWORD|TOKEN", k) and not k.endswith("FILE"):
                failures.append(f"compose: {name} takes {k} from the environment, not a file")
            if isinstance(v, str) and re.search(r"password=", v):
                failures.append(f"compose: {name}'s {k} holds a password")
            if k.endswith("FILE") and isinstance(v, str) and v.startswith("/run/secrets/"):
                check(v.split("/")[-1] in (svc.get("secrets") or []),
                      f"compose: {name}'s {k} names a secret it does not mount")
        for sec in svc.get("secrets") or []:
            check(sec in declared, f"compose: {name} mounts the undeclared secret {sec}")
        for vol in svc.get("volumes") or []:
            host = vol.split(":")[0]
            if host.startswith("./") and not host.startswith(("./certs", "./secrets")):
                check(os.path.exists(os.path.join(src, "deploy", host)),
                      f"compose: {name} mounts {host}, which does not exist")
    nodes = [n for n, s in services.items() if s.get("image", "").startswith("matchmaker/")]
    check(len(nodes) >= 2, "compose: fewer than two matchd nodes")
    for n in nodes:
        env = services[n].get("environment") or {}
        check(env.get("MATCHD_SECRET_FILE", "").startswith("/run/secrets/"),
              f"compose: node {n} does not read its secret from a file")
    check("prometheus" in services and "grafana" in services,
          "compose: no Prometheus or no Grafana service")
    prom_cfg = os.path.join(src, "deploy", "prometheus", "prometheus.yml")
    rc, out = run([promtool, "check", "config", prom_cfg])
    check(rc == 0, f"promtool check config {prom_cfg}: {out}")
    targets = str(yaml.safe_load(open(prom_cfg)).get("scrape_configs"))
    for n in nodes:
        check(f"{n}:8080" in targets, f"prometheus.yml does not scrape {n}")
    prov = os.path.join(src, "deploy", "grafana", "provisioning")
    dash_prov = yaml.safe_load(open(os.path.join(prov, "dashboards", "matchd.yml")))
    path = dash_prov["providers"][0]["options"]["path"]
    check(any(v.endswith(":" + path + "/matchd-dashboard.json:ro")
              for v in services.get("grafana", {}).get("volumes", [])),
          f"compose: grafana does not mount the dashboard under {path}")
    ds = yaml.safe_load(open(os.path.join(prov, "datasources", "prometheus.yml")))
    check(ds["datasources"][0]["url"] == "http://prometheus:9090",
          "grafana's data source is not the compose Prometheus")

for f in failures:
    print("FAIL:", f)
print(f"deploy files: {len(rule_files)} rule files, {len(alerts)} alerts, {len(panels)} panels, "
      f"{len(exprs)} queries; {len(failures)} failures")
sys.exit(1 if failures else 0)

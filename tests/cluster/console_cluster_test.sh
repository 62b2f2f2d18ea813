#!/usr/bin/env bash
# The console's cluster view (docs/console.md, "The cluster"; issue 36):
# three matchd nodes (deploy/cluster-local.sh, one Redis, one PostgreSQL),
# users matched through every node; then
#   - GET /v1/console/cluster on each node answers all three nodes, each
#     with its own counters (the matches its users made);
#   - headless Chromium on node 1's console shows a row per node;
#   - node 3 SIGKILLed: node 1 still answers, promptly, with node 3 gone
#     from the live nodes or named with an error, never stale counters.
# Usage: console_cluster_test.sh MATCHCTL CLIENT_DIR SHOT_DIR
set -euo pipefail
matchctl=$1 client=$2 shots=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(mktemp -d /tmp/mm_console_cluster.XXXXXX)
cluster="$root/deploy/cluster-local.sh"
fail() { echo "FAIL: $*"; exit 1; }
trap '"$cluster" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
token="cluster-console-token-$$-0123456789"
export MATCHD_CONSOLE_TOKEN=$token MATCHD_CLUSTER_INSECURE=true
export MATCHD_QUEUES=q0,q1 MATCHD_LOG_LEVEL=warn MATCHD_MEMBER_TTL=3000
"$cluster" start "$dir" 3 >/dev/null
secret=$(cat "$dir/secret")
mapfile -t urls <"$dir/urls"
args=()
for u in "${urls[@]}"; do args+=(--url "$u"); done
"$matchctl" load "${args[@]}" --secret "$secret" --users 600 --rate 600 \
  --queues 2 --cancel-rate 0 --prefix "cc$$-" --no-progress >"$dir/load.out" 2>&1 \
  || { tail -n 5 "$dir/load.out"; fail "matchctl load"; }
tail -n 1 "$dir/load.out"

cluster_json() { # URL
  curl -fsS -m 10 -H "Authorization: Bearer $token" "$1/v1/console/cluster"
}
for u in "${urls[@]}"; do
  cluster_json "$u" >"$dir/c.json" || fail "GET /v1/console/cluster on $u"
  python3 - "$dir/c.json" "$u" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
nodes = {n["node"]: n for n in c["nodes"]}
assert set(nodes) == {"node-1", "node-2", "node-3"}, (sys.argv[2], sorted(nodes))
for name, n in nodes.items():
    assert "stats" in n, (name, n)
    matched = sum(q["matched_users"] for q in n["stats"]["queues"])
    # Each node counts its own users' matches (a third of 600 each).
    assert matched >= 100, (name, matched)
print(f"{sys.argv[2]} ({c['node']}): " + ", ".join(
    f"{k} matched {sum(q['matched_users'] for q in v['stats']['queues'])}" for k, v in sorted(nodes.items())))
PY
done
# The counters differ by node: not one node's copied three times.
cluster_json "${urls[0]}" | python3 -c '
import json, sys
c = json.load(sys.stdin)
seen = [json.dumps(n["stats"]["queues"], sort_keys=True) for n in c["nodes"]]
assert len(set(seen)) == 3, "the nodes show the same counters"'

# The page: one row per node.
mkdir -p "$shots"
node "$root/tests/cluster/console_cluster.mjs" "${urls[0]}" "$token" "$client" "$shots" \
  || fail "the console's cluster view in Chromium"

# Node 3 dies: node 1 answers at once, without node 3's counters.
"$cluster" kill "$dir" 3 >/dev/null
start=$(date +%s%N)
cluster_json "${urls[0]}" >"$dir/c.json" || fail "no answer with node 3 dead"
ms=$((($(date +%s%N) - start) / 1000000))
python3 - "$dir/c.json" "$ms" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
nodes = {n["node"]: n for n in c["nodes"]}
assert "stats" in nodes["node-1"] and "stats" in nodes["node-2"], nodes.keys()
dead = nodes.get("node-3")
assert dead is None or "error" in dead, dead
print(f"node 3 killed: answered in {sys.argv[2]} ms; node-3",
      "gone from the live nodes" if dead is None else "named: " + dead["error"])
PY
[ "$ms" -le 8000 ] || fail "the cluster view took $ms ms with a dead node"
# Once its membership lapses, it is gone from the view.
for _ in $(seq 40); do
  cluster_json "${urls[0]}" | grep -q '"node-3"' || { gone=1; break; }
  sleep 0.25
done
[ "${gone:-0}" = 1 ] || fail "node 3 still in the view after its membership lapsed"
echo "PASS: every node's counters on one page; a dead node dropped"

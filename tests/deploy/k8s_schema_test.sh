#!/usr/bin/env bash
# deploy/k8s/*.yaml against the Kubernetes API schemas (issue 36):
# tools/k8s-schema/check.mjs (kubernetes-models, pinned by its lock file,
# on Node 22, which it needs) passes them, and fails each broken copy
# naming what is wrong: a type error, a probe gone, a budget selecting
# nothing.
# Usage: k8s_schema_test.sh SOURCE_DIR
set -euo pipefail
src=$1
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=../support/node_versions.sh
. "$src/tests/support/node_versions.sh"
node=$(node_versions "$src" | tail -n 1)
check=("$node" "$src/tools/k8s-schema/check.mjs")
"${check[@]}" "$src"/deploy/k8s/*.yaml || fail "deploy/k8s does not pass"
dir=$(mktemp -d /tmp/mm_k8s.XXXXXX)
trap 'rm -rf "$dir"' EXIT
broken() { # NAME FILE SED-EXPRESSION EXPECTED-PROBLEM
  mkdir -p "$dir/$1"
  cp "$src"/deploy/k8s/*.yaml "$dir/$1/"
  sed -i "$3" "$dir/$1/$2"
  cmp -s "$dir/$1/$2" "$src/deploy/k8s/$2" && fail "$1: the edit changed nothing"
  local out rc=0
  out=$("${check[@]}" "$dir/$1"/*.yaml) || rc=$?
  [ "$rc" = 1 ] || fail "$1: exit $rc on a broken manifest: $out"
  grep -q -- "$4" <<<"$out" || fail "$1: expected '$4' in: $out"
  echo "broken $1: refused ($(grep -m1 FAIL <<<"$out"))"
}
broken replicas deployment.yaml 's/replicas: 3/replicas: "three"/' "replicas must be integer"
broken port deployment.yaml 's/containerPort: 8080/containerPort: api/' "containerPort must be integer"
broken probe deployment.yaml 's/readinessProbe:/readinesProbe:/' "readiness is not /readyz"
broken budget pdb.yaml 's/matchLabels: {app.kubernetes.io\/name: matchd}/matchLabels: {app: other}/' "no PodDisruptionBudget"
broken kind service.yaml 's/^kind: Service/kind: Servise/' "no schema for v1 Servise"
echo "PASS: deploy/k8s passes the schemas; 5 broken copies refused"

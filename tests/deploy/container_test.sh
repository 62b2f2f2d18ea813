#!/usr/bin/env bash
# deploy/Dockerfile built and run with Podman (issue 36): the run-time stage
# made from a Debian 12 base built here with mmdebstrap (no registry can be
# reached), matchd and matchctl from this build (BINARIES=prebuilt), then:
#   - the image runs as its own user, has no compiler, CMake or browser, and
#     every library matchd links resolves in it;
#   - a container of it reads its token secret from a mounted file (as a
#     compose or Kubernetes secret is), answers /readyz, passes its own
#     HEALTHCHECK, and matches two users;
#   - `podman stop` (SIGTERM) drains it and it exits 0.
# Usage: container_test.sh SOURCE_DIR MATCHD MATCHCTL
# Everything lives in a private directory (image store included) and is
# removed at the end; the container uses the host's network on a free
# loopback port.
set -euo pipefail
src=$1 matchd=$2 matchctl=$3
fail() { echo "FAIL: $*"; exit 1; }
for tool in podman runc mmdebstrap; do
  command -v "$tool" >/dev/null || fail "$tool not found: deploy/setup.sh installs it"
done
# shellcheck source=../support/free_port.sh
. "$src/tests/support/free_port.sh"
dir=$(mktemp -d /tmp/mm_container.XXXXXX)
pm() { podman --root "$dir/storage" --runroot "$dir/run" "$@"; }
cleanup() {
  pm rm -f -t 0 mm-test >/dev/null 2>&1 || true
  pm system reset -f >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
# runc: crun refuses this machine's hybrid cgroup mounts. Limits at most
# the ones this shell has: raising them inside the container is refused.
# (nproc at this machine's hard limit is refused too; 4096 is accepted.)
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ] && nproc=4096
cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$dir/containers.conf"

# The base image: Debian 12 from the same archive apt uses here.
start=$(date +%s)
mmdebstrap --quiet --variant=minbase bookworm "$dir/base.tar" \
  || fail "mmdebstrap could not make a Debian 12 base"
pm import --quiet "$dir/base.tar" localhost/mm-debian:12 >/dev/null
rm -f "$dir/base.tar"
# The context holds the two binaries only: the build stage is not run.
mkdir -p "$dir/ctx/build/bin"
cp "$matchd" "$matchctl" "$dir/ctx/build/bin/"
cp "$src/.dockerignore" "$dir/ctx/"
pm build --quiet --format docker --network host -f "$src/deploy/Dockerfile" \
  --build-arg BASE=localhost/mm-debian:12 \
  --build-arg RUNTIME_BASE=localhost/mm-debian:12 \
  --build-arg BINARIES=prebuilt -t localhost/matchmaker/matchd:test \
  "$dir/ctx" >"$dir/build.log" 2>&1 || { tail -n 30 "$dir/build.log"; fail "podman build"; }
image=localhost/matchmaker/matchd:test
echo "image built in $(($(date +%s) - start)) s: $(pm image inspect --format '{{.Size}}' "$image") bytes"

# What is in it.
uid=$(pm run --rm --no-healthcheck --entrypoint id "$image" -u)
[ "$uid" = 10001 ] || fail "runs as uid $uid, not the image's user 10001"
tools=$(pm run --rm --no-healthcheck --entrypoint sh "$image" -c \
  'for x in cc gcc g++ c++ clang cmake make ninja chromium node npm; do command -v "$x"; done; true')
[ -z "$tools" ] || fail "build tools or a browser in the run-time image: $tools"
missing=$(pm run --rm --no-healthcheck --entrypoint sh "$image" -c 'ldd /usr/local/bin/matchd | grep "not found" || true')
[ -z "$missing" ] || fail "libraries missing in the image: $missing"
pm run --rm --no-healthcheck "$image" --version | grep -q '^matchd ' || fail "matchd --version"

# A node of it, its secret from a file (readable by the image's user).
secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$secret" >"$dir/matchd_secret"
chmod 0444 "$dir/matchd_secret"
port=$(free_port)
url="http://127.0.0.1:$port"
# (Its health is checked below by hand: no systemd here runs the timer.)
pm run -d --name mm-test --network host --health-interval disable \
  -e MATCHD_LISTEN="127.0.0.1:$port" \
  -v "$dir/matchd_secret:/run/secrets/matchd_secret:ro" "$image" \
  --secret-file /run/secrets/matchd_secret --queues default \
  >/dev/null 2>>"$dir/podman.log"
ready=false
for _ in $(seq 100); do
  if curl -fsS "$url/readyz" >/dev/null 2>&1; then ready=true; break; fi
  sleep 0.1
done
$ready || { pm logs mm-test | tail -n 20; fail "the container's matchd never got ready"; }
pm healthcheck run mm-test >/dev/null || fail "the image's HEALTHCHECK fails on a ready node"
mc() { "$matchctl" --url "$url" --secret "$secret" "$@"; }
mc join --user alice --queue default --ticket t1 | grep -q '"state"' || fail "alice's join"
mc join --user bob --queue default --ticket t2 | grep -q '"state"' || fail "bob's join"
state=
for _ in $(seq 50); do
  state=$(mc state --user alice --ticket t1 | tail -n 1)
  case $state in *'"matched"'*) break ;; esac
  sleep 0.1
done
case $state in *'"matched"'*) ;; *) fail "alice not matched: $state" ;; esac
echo "matched through the container: $state"
# A token signed with another secret is refused: the file's is the one.
wrong=$("$matchctl" --url "$url" --secret "not-the-secret-of-this-node-0123" \
  state --user alice --ticket t1 2>&1 || true)
grep -q '^HTTP/1.1 401' <<<"$wrong" || fail "a wrong secret: $wrong"

# SIGTERM drains it; it exits 0.
pm stop -t 20 mm-test >/dev/null 2>>"$dir/podman.log"
code=$(pm inspect --format '{{.State.ExitCode}}' mm-test)
pm logs mm-test 2>&1 | grep -q 'drained in' || fail "no drain in the container's log"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
echo "PASS: image built and run; stopped with a drain, exit 0"

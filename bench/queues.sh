# shellcheck shell=bash
# bench/queues.sh: `bench/run queues`, sourced by bench/run (which owns
# $root, $build, $dir, the private redis on $port, free_port and the cleanup
# trap).
#
# Queues are declared, not invented (issue 12): the join latency of users of
# the served queue `default` without and with a client that invents queue
# names. One matchd on the private Redis (in-memory persistence) with the
# default configuration (it serves `default` only). The others: `matchctl
# load` (QUEUES_USERS users at QUEUES_RATE/s, each opens its WebSocket and
# joins `default`); the attacker (bench/queues_attack.py): QUEUES_INVENTED
# distinct users each joining a queue of its own invented name over
# keep-alive HTTP (QUEUES_ATTACK_CONNS connections, QUEUES_ATTACK_RATE
# joins/s in all), pass after pass for as long as the others' load runs.
# Runs in the order quiet, attack, attack, quiet; each kind counts with its
# better run. Then once more the attack against a node in open mode
# (`--queues '*'`, what every node did before), for comparison only.
# After each attack the others run once more on the same node: what the
# invented names left behind. Figures: the p50 of the others' join answer
# ("join answer" of matchctl's report) and of their time to match; the
# attacker's answers by status; the node's known queues, /metrics size and
# depth labels.
# Last line: queues_p50_ratio=X.XX (join p50 with the attack / without).

queues_users=${QUEUES_USERS:-6000}
queues_rate=${QUEUES_RATE:-500}
queues_invented=${QUEUES_INVENTED:-10000}
queues_attack_conns=${QUEUES_ATTACK_CONNS:-2}
queues_attack_rate=${QUEUES_ATTACK_RATE:-1600}
queues_secret="bench-queues-secret-0123456789"

queues_join_p50="" queues_match_p50="" queues_after_p50=""
# queues_others LABEL MPORT: the others' load against the node on MPORT.
queues_others() {
  "$build/bin/matchctl" load --url "http://127.0.0.1:$2" \
    --secret "$queues_secret" --users "$queues_users" --rate "$queues_rate" \
    --queues 1 --cancel-rate 0 --settle-ms 3000 --no-progress \
    --prefix "$1-" >"$dir/load_$1.out" 2>&1 || true
}

# queues_p50 LABEL: the join answer's p50 of that load (ms).
queues_p50() {
  sed -n 's/^join answer *p50 \([0-9.]*\) ms.*/\1/p' "$dir/load_$1.out"
}

# queues_run LABEL ATTACK(0|1) [MATCHD ARGS...]: one matchd, the others'
# load (and the attacker); sets queues_join_p50 and queues_match_p50. With
# the attack, the others run once more on the same node after it stopped:
# queues_after_p50 (what the invented names left behind).
queues_run() {
  local label=$1 attack=$2
  shift 2
  local mport mpid apid=""
  mport=$(free_port)
  "$build/bin/matchd" --listen "127.0.0.1:$mport" --secret "$queues_secret" \
    --node "queues-$label" --log-level warn --threads 2 \
    --redis "127.0.0.1:$port" "$@" >"$dir/matchd_$label.log" 2>&1 &
  mpid=$!
  local _
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  if [ "$attack" = 1 ]; then
    python3 "$root/bench/queues_attack.py" --port "$mport" \
      --secret "$queues_secret" --names "$queues_invented" \
      --conns "$queues_attack_conns" --rate "$queues_attack_rate" \
      --tag "$label" --stop "$dir/stop_$label" >"$dir/attack_$label.out" 2>&1 &
    apid=$!
    sleep 1 # the attack is in full swing before the others start
  fi
  queues_others "$label" "$mport"
  queues_after_p50=""
  if [ -n "$apid" ]; then
    touch "$dir/stop_$label"
    wait "$apid" || true
    queues_others "$label-after" "$mport"
    queues_after_p50=$(queues_p50 "$label-after")
  fi
  local metrics
  metrics=$(curl -fsS "http://127.0.0.1:$mport/metrics" || true)
  kill -TERM "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null || true
  queues_join_p50=$(queues_p50 "$label")
  queues_match_p50=$(sed -n 's/^time to match *p50 \([0-9.]*\) ms.*/\1/p' \
                       "$dir/load_$label.out")
  echo "# $label: matchd $*"
  grep -E '^(join answer|time to match|errors)' "$dir/load_$label.out" \
    | sed 's/^/#   /'
  if [ -n "$apid" ]; then
    sed 's/^/#   attacker: /' "$dir/attack_$label.out"
    echo "#   the others again after the attack: join answer p50"\
" ${queues_after_p50:-?} ms ($(grep '^verdict=' "$dir/load_$label-after.out" \
      | cut -d' ' -f1))"
  fi
  echo "#   after: mm_queues_known $(echo "$metrics" \
    | sed -n 's/^mm_queues_known{[^}]*} //p'), /metrics $(printf %s \
    "$metrics" | wc -c) bytes, $(echo "$metrics" \
    | grep -c '^mm_queue_depth{') depth labels"
  grep '^verdict=' "$dir/load_$label.out" | sed 's/^/#   /'
  if [ -z "$queues_join_p50" ]; then
    echo "bench/run: queues $label: no join figure" >&2
    exit 1
  fi
}

queues_main() {
  cmake --build "$build" -j2 --target matchd matchctl >/dev/null
  echo "# bench/run queues: $(nproc) cores, load average"\
" $(cut -d' ' -f1-3 /proc/loadavg); others: $queues_users users at"\
" $queues_rate/s joining 'default'; attacker: $queues_invented invented"\
" names per pass, $queues_attack_conns connections, $queues_attack_rate/s"
  local q1 a1 a2 q2 m_q1 m_a1 m_a2 m_q2 after1 after2
  queues_run quiet1 0; q1=$queues_join_p50 m_q1=$queues_match_p50
  queues_run attack1 1; a1=$queues_join_p50 m_a1=$queues_match_p50
  after1=$queues_after_p50
  queues_run attack2 1; a2=$queues_join_p50 m_a2=$queues_match_p50
  after2=$queues_after_p50
  queues_run quiet2 0; q2=$queues_join_p50 m_q2=$queues_match_p50
  queues_run open 1 --queues '*'
  local quiet attack
  quiet=$(awk -v a="$q1" -v b="$q2" 'BEGIN { print (a < b ? a : b) }')
  attack=$(awk -v a="$a1" -v b="$a2" 'BEGIN { print (a < b ? a : b) }')
  echo "# join p50 (ms): quiet $q1 / $q2, attack $a1 / $a2, after the"\
" attack $after1 / $after2; open mode: with the attack $queues_join_p50,"\
" after it $queues_after_p50"
  echo "# time-to-match p50 (ms): quiet $m_q1 / $m_q2, attack $m_a1 / $m_a2;"\
" open mode with the attack $queues_match_p50"
  awk -v a="$attack" -v q="$quiet" \
    'BEGIN { if (q <= 0) q = 0.1; printf "queues_p50_ratio=%.2f\n", a / q }'
}

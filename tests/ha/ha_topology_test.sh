#!/usr/bin/env bash
# The HA topology of the local stack (deploy/local/lib/patroni.sh, kafka_cluster.sh) under its two faults,
# as the pieces the HA chaos suite stands on:
#   - PostgreSQL 15 under Patroni, two nodes, synchronous replication: a writer commits one row per
#     transaction through the multi-host URL (target_session_attrs=read-write) while the primary node is
#     SIGKILLed (Patroni and PostgreSQL); a write through the same URL succeeds again once Patroni has
#     promoted the standby (the time is printed: kill to first committed write), and every row whose commit
#     was acknowledged is on the new primary. The killed node is started again and rejoins as a standby.
#   - Three KRaft brokers, a topic with replication factor 3 and min.insync.replicas 2: the broker leading
#     the most partitions is SIGKILLed and a producer with acks=all and idempotence still gets every record
#     acknowledged (the stall is printed) and they are all there; with a second broker down it is refused;
#     with that broker back it succeeds again.
#   - Everything stopped: no process of the topology left, no port still listening.
# Prints the topology's memory (RSS) and each phase's time. About a minute and a half on the 2-core machine.
# Needs Debian's patroni and etcd-server (deploy/local/install-deps) and Kafka's jars (tests/run fetches them).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/tests/ha/lib.sh"
source "$root/deploy/local/lib/patroni.sh"

require_executables "run deploy/local/install-deps" "$PATRONI_BIN" "$ETCD_BIN" "$PG_BIN/postgres"
work=$(new_work_dir ha-test)
writer_pid="" producer_pid="" kafka_starter=""
# The producer run in the background (and its pipeline's java), when it has not finished by itself.
stop_producer() {
  [[ -n $producer_pid ]] || return 0
  # shellcheck disable=SC2046 # a list of pids
  kill $(ps -o pid= --ppid "$producer_pid") "$producer_pid" 2>/dev/null || true
  wait "$producer_pid" 2>/dev/null || true
  producer_pid=""
}
cleanup() {
  local rc=$?
  [[ -z $writer_pid ]] || kill "$writer_pid" 2>/dev/null || true
  stop_producer
  if [[ -n $kafka_starter ]]; then
    kill "$kafka_starter" 2>/dev/null || true
    wait "$kafka_starter" 2>/dev/null || true
  fi
  kafka_cluster_stop "$work" || true
  patroni_stop "$work" || true
  if ((rc != 0)); then
    local f
    for f in "$work"/patroni/pg*/patroni.log "$work"/patroni/pg*/postgresql.log "$work"/kafka-cluster/node*/server.log; do
      [[ -f $f ]] && { echo "--- last lines of $f ---" >&2; tail -n 15 "$f" >&2; }
    done
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# Every pid of the topology, to prove at the end that none outlives the stop.
topology_pids() {
  local f pm
  for f in "$work"/patroni/pg*/patroni.pid "$work"/patroni/etcd/etcd.pid "$work"/kafka-cluster/node*/kafka.pid; do
    [[ -f $f ]] && cat "$f"
  done
  for f in "$work"/patroni/pg*/data/postmaster.pid; do
    [[ -f $f ]] || continue
    pm=$(head -n 1 "$f")
    echo "$pm"
    ps -o pid= --ppid "$pm" | tr -d ' '
  done
}

# The brokers take half a minute to come up: they do while PostgreSQL is tested.
step "starting three KRaft brokers (in the background)"
# shellcheck disable=SC2046 # the port specs are words
kafka_cluster_start "$work" $(kafka_cluster_free_ports) >"$work/kafka-start.log" 2>&1 &
kafka_starter=$!

# ---- PostgreSQL under Patroni ------------------------------------------------------------------------
step "starting etcd and two Patroni nodes (synchronous_mode)"
# shellcheck disable=SC2046 # the port specs are words
PATRONI_FAST=1 patroni_start "$work" sync $(patroni_free_ports 2)
url=$(patroni_url "$work")
[[ $url == "postgresql://postgres@127.0.0.1:"*",127.0.0.1:"*"/postgres?target_session_attrs=read-write" ]] ||
  fail "unexpected multi-host URL: $url"
old_primary=$(patroni_primary "$work") || fail "Patroni names no primary"
[[ $(psql -X -tA "$url" -c 'SELECT pg_is_in_recovery()') == f ]] || fail "the URL reached a standby"
[[ $(psql -X -tA "$url" -c 'SHOW synchronous_standby_names') == *pg* ]] ||
  fail "synchronous replication is not on: synchronous_standby_names is empty"
psql -X -q "$url" -c 'CREATE TABLE ha_rows (id int PRIMARY KEY)'

# One row per transaction, each through a fresh connection of the multi-host URL; an id goes to `acked`
# only once its commit was acknowledged. Failures (no primary yet) are retried with the next id.
acked=$work/acked
: >"$acked"
(
  i=0
  while :; do
    i=$((i + 1))
    if PGCONNECT_TIMEOUT=2 timeout 5 psql -X -q -tA "$url" -c "INSERT INTO ha_rows VALUES ($i)" >/dev/null 2>&1; then
      echo "$i" >>"$acked"
    fi
  done
) &
writer_pid=$!
for _ in $(seq 1 100); do (($(wc -l <"$acked") >= 20)) && break; sleep 0.1; done
(($(wc -l <"$acked") >= 20)) || fail "the writer got fewer than 20 commits in 10 s"

step "SIGKILL of the primary node $old_primary"
kill_at=$(now)
patroni_kill_node "$work" "$old_primary"
until PGCONNECT_TIMEOUT=2 timeout 5 psql -X -q "$url" -c 'INSERT INTO ha_rows VALUES (-1)' >/dev/null 2>&1; do
  (($(since "$kill_at" | cut -d. -f1) < 60)) || fail "no write succeeded through $url within 60 s of the kill"
  sleep 0.1
done
failover_s=$(since "$kill_at")
sleep 1
kill "$writer_pid"
wait "$writer_pid" 2>/dev/null || true
writer_pid=""
new_primary=$(patroni_primary "$work") || fail "no primary after the failover"
[[ $new_primary != "$old_primary" ]] || fail "$old_primary is primary again: Patroni did not fail over"
echo "failover: kill of $old_primary to the first committed write through the URL: ${failover_s} s (new primary $new_primary)"

acked_n=$(wc -l <"$acked")
missing=$(psql -X -tA "$url" -c "SELECT count(*) FROM unnest('{$(paste -sd, "$acked")}'::int[]) AS a(id)
  WHERE NOT EXISTS (SELECT 1 FROM ha_rows r WHERE r.id = a.id)")
[[ $missing == 0 ]] || fail "$missing of $acked_n acknowledged commits are missing on the new primary"
echo "synchronous replication: all $acked_n acknowledged commits are on the new primary"

step "starting $old_primary again: it rejoins as a standby"
patroni_start_node "$work" "$old_primary"
patroni_wait_healthy "$work" 60 || fail "$old_primary did not rejoin"
[[ $(patroni_primary "$work") == "$new_primary" ]] || fail "the primary changed when $old_primary came back"

# ---- Three KRaft brokers -----------------------------------------------------------------------------
step "waiting for the three KRaft brokers"
rc=0
wait "$kafka_starter" || rc=$?
kafka_starter=""
((rc == 0)) || { cat "$work/kafka-start.log" >&2; fail "the three brokers did not start"; }
bootstrap=$(kafka_cluster_bootstrap "$work")
topic=ha-smoke
kafka_cluster_create_topic "$work" "$topic" 6

rss_mb=$(topology_pids | sort -u | while read -r p; do ps -o rss= -p "$p" 2>/dev/null || true; done |
  awk '{ s += $1 } END { printf "%d", s / 1024 }')
kafka_mb=$(for f in "$work"/kafka-cluster/node*/kafka.pid; do ps -o rss= -p "$(cat "$f")"; done |
  awk '{ s += $1 } END { printf "%d", s / 1024 }')
echo "memory: the whole topology ${rss_mb} MiB RSS, of which the three brokers ${kafka_mb} MiB"

# produce FIRST COUNT [TIMEOUT_MS]: keyed records (spread over the partitions), each acknowledged before the
# next (--sync: the tool exits non-zero on the first failure), acks=all, idempotent, retried (the tool's
# own default is 3 retries, not the client's unlimited ones within delivery.timeout.ms). TIMEOUT_MS bounds the
# delivery and also max.block.ms: without a controller quorum an idempotent producer cannot even get its
# producer id, and send() blocks for max.block.ms (60 s by default).
produce() {
  seq "$1" $(($1 + $2 - 1)) | sed 's/.*/k&:v&/' |
    KAFKA_TOOLS_JAVA_OPTS="-Xmx96m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
      kafka_run_class org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" --topic "$topic" --sync \
      --property parse.key=true --property key.separator=: \
      --producer-property acks=all --producer-property enable.idempotence=true \
      --producer-property delivery.timeout.ms="${3:-30000}" --producer-property max.block.ms="${3:-30000}" \
      --request-timeout-ms 3000 --message-send-max-retries 1000000 --retry-backoff-ms 200 \
      --producer-property linger.ms=0 >"$work/produce.log" 2>&1
}

produce 1 60 || { cat "$work/produce.log" >&2; fail "acks=all produce with three brokers failed"; }

leader=$(kafka_cluster_busiest_leader "$work" "$topic") || fail "no partition leader found"
step "SIGKILL of broker $leader, leader of the most partitions"
kill_at=$(now)
kafka_cluster_kill "$work" "$leader"
produce 61 60 || { cat "$work/produce.log" >&2; fail "acks=all produce with one broker down (min ISR met) failed"; }
echo "broker loss: 60 acks=all records produced after the kill of broker $leader in $(since "$kill_at") s (its partitions wait until the controller fences it)"
records=$(topic_records "$bootstrap" "$topic")
[[ $records == 120 ]] || fail "the topic holds $records records, not the 120 acknowledged"

second=$((leader % 3 + 1))
step "SIGKILL of broker $second as well: min.insync.replicas (and the controller quorum) lost"
kafka_cluster_kill "$work" "$second"
# The Java producer either fails the record (a timeout: no quorum, so the ISR never shrinks to the
# survivor) or, when it never got its producer id, waits on it past delivery.timeout.ms: both are refusals.
refused_at=$(now)
produce 121 1 8000 &
producer_pid=$!
for _ in $(seq 1 250); do kill -0 "$producer_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$producer_pid" 2>/dev/null; then
  stop_producer
  how="neither acknowledged nor failed within 25 s (the Java producer waits past delivery.timeout.ms)"
else
  rc=0
  wait "$producer_pid" || rc=$?
  producer_pid=""
  ((rc != 0)) || fail "a record was acknowledged with two of three brokers down"
  grep -q 'TimeoutException\|NotEnoughReplicas' "$work/produce.log" ||
    { cat "$work/produce.log" >&2; fail "the refused produce did not fail with a timeout or NotEnoughReplicas"; }
  how="$(grep -o 'TimeoutException\|NotEnoughReplicas[A-Za-z]*' "$work/produce.log" | sort -u | paste -sd' ') after $(since "$refused_at") s"
fi
echo "two brokers down: acks=all refused: $how"

step "broker $second back: acks=all succeeds again"
back_at=$(now)
kafka_cluster_start_node "$work" "$second"
produce 122 10 60000 || { cat "$work/produce.log" >&2; fail "acks=all produce after broker $second came back failed"; }
echo "broker $second back: produce succeeded $(since "$back_at") s after its start"

# ---- Stop --------------------------------------------------------------------------------------------
step "stopping everything"
pids=$(topology_pids | sort -u)
stop_at=$(now)
kafka_cluster_stop "$work" || fail "kafka_cluster_stop left ports in use"
patroni_stop "$work" || fail "patroni_stop left ports in use"
echo "stop took $(since "$stop_at") s"
left=()
for p in $pids; do
  [[ -r /proc/$p/stat && $(cut -d' ' -f3 "/proc/$p/stat") != Z ]] && left+=("$p $(tr '\0' ' ' </proc/"$p"/cmdline | cut -c1-80)")
done
((${#left[@]} == 0)) || fail "processes left after the stop: $(printf '%s; ' "${left[@]}")"
step "HA topology: passed"

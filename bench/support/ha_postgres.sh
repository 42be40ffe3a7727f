# Sourced by the benchmarks' scripts: the HA topology's PostgreSQL (deploy/local/lib/patroni.sh: two nodes
# under Patroni, synchronous replication), set up to be compared with pg_start's single server.
#
# ha_postgres_start STATE_DIR: etcd and two Patroni nodes in sync mode, durable (fsync on, synchronous_commit
# on: every commit waits for the synchronous standby's flush; PATRONI_FAST is refused). patroni.sh gives
# its nodes 128 MB of shared_buffers where pg_start gives 256 MB: ALTER SYSTEM on each node and a restart
# through Patroni's REST API (standby first) bring them to pg_start's value, so that the comparison
# measures the replication and not a smaller cache. What stays different is the HA topology's own:
# wal_log_hints (pg_rewind needs it: a page's first hint bit after a checkpoint writes a full-page image)
# and the standby's walreceiver and replay. Needs common.sh, postgres.sh and patroni.sh.
#
# ha_postgres_postmasters STATE_DIR: "PRIMARY_PID STANDBY_PID", the two postmasters.
# ha_postgres_caught_up PORT: waits until every standby of the primary on PORT has replayed its WAL up to
# now (a phase then starts with no replay left over from the last one's tail or the settle's VACUUM).
ha_postgres_start() {
  local state=$1 node
  [[ ${PATRONI_FAST:-0} != 1 ]] || die "PATRONI_FAST=1 turns fsync off: not for a benchmark against a durable server"
  # shellcheck disable=SC2046 # the port specs are words
  patroni_start "$state" sync $(patroni_free_ports 2) >&2
  for node in $(patroni_nodes "$state"); do
    pg_psql "$(patroni_pg_port "$state" "$node")" postgres <<<"ALTER SYSTEM SET shared_buffers = '256MB'" >/dev/null
  done
  local primary
  primary=$(patroni_primary "$state") || die "Patroni names no primary"
  # The standby first: the primary restarts with its synchronous standby there to confirm.
  for node in $(patroni_nodes "$state" | tr ' ' '\n' | grep -vx "$primary") "$primary"; do
    curl -fsS -o /dev/null -X POST -d '{}' "http://127.0.0.1:$(patroni_rest_port "$state" "$node")/restart" ||
      die "Patroni did not restart $node"
  done
  patroni_wait_healthy "$state" 90 || die "the Patroni cluster did not come back whole after its restart"
  [[ $(patroni_primary "$state") == "$primary" ]] || die "the primary moved during the restart"
  for node in $(patroni_nodes "$state"); do
    [[ $(pg_psql "$(patroni_pg_port "$state" "$node")" postgres -tA <<<"SHOW shared_buffers") == 256MB ]] ||
      die "$node did not take shared_buffers = 256MB"
  done
  [[ -n $(pg_psql "$(patroni_pg_port "$state" "$primary")" postgres -tA <<<"SHOW synchronous_standby_names") ]] ||
    die "no synchronous standby named on $primary: not the topology to measure"
}

ha_postgres_postmasters() {
  local state=$1 primary node standby=
  primary=$(patroni_primary "$state") || die "Patroni names no primary"
  for node in $(patroni_nodes "$state"); do [[ $node == "$primary" ]] || standby=$node; done
  echo "$(head -n 1 "$state/patroni/$primary/data/postmaster.pid") $(head -n 1 "$state/patroni/$standby/data/postmaster.pid")"
}

ha_postgres_caught_up() {
  local port=$1
  for _ in $(seq 1 600); do
    [[ $(pg_psql "$port" postgres -tA <<<"SELECT count(*) FROM pg_stat_replication
      WHERE replay_lsn IS NULL OR replay_lsn < pg_current_wal_lsn()") == 0 ]] && return 0
    sleep 0.1
  done
  die "the standby has not replayed the primary's WAL after 60 s"
}

# shellcheck shell=bash
# PostgreSQL 15 under Patroni (Debian's patroni 3.0.2) with one etcd member (Debian's etcd-server 3.4) as its
# DCS, all on loopback, all under STATE_DIR/patroni: the HA form of postgres.sh for the local stack and the
# tests. Sourced; needs common.sh (and postgres.sh for PG_BIN); the caller has `set -euo pipefail`.
# As root, etcd, Patroni and so PostgreSQL run as the `postgres` user (PostgreSQL refuses root).
#
#   patroni_start STATE_DIR MODE ETCD_PORT:ETCD_PEER_PORT PG_PORT:REST_PORT PG_PORT:REST_PORT [...]
#       etcd and one node per PG_PORT:REST_PORT (pg1, pg2, ...); the first start bootstraps and records the
#       ports in STATE_DIR/patroni/cluster.env, later starts (no ports needed) reuse them. MODE is the
#       replication: sync (synchronous_mode, the default), strict (synchronous_mode_strict: writes wait while
#       no synchronous standby is there) or async. A MODE other than the running one is applied (PATCH /config).
#   patroni_wait_healthy STATE_DIR [TIMEOUT_S=60]   every node running, a leader, and (sync, strict) a
#                                          synchronous standby; patroni_start ends with it
#   patroni_free_ports N                   "ETCD:PEER PG:REST ..." for N nodes, distinct free ports (for tests)
#   patroni_wait_writable STATE_DIR [TIMEOUT_S=60]   a write through patroni_url commits (in sync mode:
#                                          on a standby too); prints the seconds it took
#   patroni_url STATE_DIR [DB=postgres]    postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/DB?target_session_attrs=read-write
#   patroni_primary STATE_DIR              the node (pg1, ...) Patroni's REST API names primary; fails if none
#   patroni_nodes STATE_DIR                pg1 pg2 ...
#   patroni_pg_port / patroni_rest_port STATE_DIR NODE
#   patroni_kill_postgres STATE_DIR NODE   SIGKILL the node's postmaster and its backends (Patroni restarts it)
#   patroni_kill_node STATE_DIR NODE       SIGKILL Patroni and its PostgreSQL: the machine died
#   patroni_start_node STATE_DIR NODE      start a stopped or killed node again (it rejoins, pg_rewind if needed)
#   patroni_kill_etcd / patroni_start_etcd STATE_DIR
#   patroni_set_mode STATE_DIR MODE        sync | strict | async, on the running cluster
#   patroni_stop STATE_DIR                 standbys, primary, etcd, in that order; nothing left, ports free
#
# Timings (DCS, so for every node; environment at the first start): PATRONI_TTL (10 s: the leader key's
# lease, so the longest a dead primary is waited for), PATRONI_LOOP_WAIT (1 s), PATRONI_RETRY_TIMEOUT
# (4 s; Patroni wants loop_wait + 2 * retry_timeout <= ttl). PATRONI_FAST=1: fsync off (test clusters).

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PATRONI_BIN=${PATRONI_BIN:-/usr/bin/patroni}
ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}

_patroni_dir() { printf '%s/patroni\n' "$1"; }

# Runs a daemon as the owner of the data: `postgres` when root. setpriv execs (runuser forks and waits), so
# the pid start_daemon records is the daemon's own and a SIGKILL of it kills exactly the daemon.
# _patroni_owner_cmd HOME [ENV_OPTION...]: the command's prefix, NUL-separated.
_patroni_owner_cmd() {
  local home=$1; shift
  if [[ $(id -u) -eq 0 ]]; then printf '%s\0' setpriv --reuid=postgres --regid=postgres --init-groups; fi
  printf '%s\0' env "$@" HOME="$home"
}

# A process that has exited counts as gone even while it is a zombie (this machine's init reaps late).
_patroni_alive() { [[ -r /proc/$1/stat ]] && [[ $(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) != Z ]]; }

# SIGTERM, up to TIMEOUT_S for the process to go, then SIGKILL. Says so if it had to kill.
_patroni_term() {
  local pid=$1 timeout=$2 what=$3 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do _patroni_alive "$pid" || return 0; sleep 0.1; done
  echo "patroni_stop: $what ignored SIGTERM for ${timeout}s; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

_patroni_chown() { if [[ $(id -u) -eq 0 ]]; then chown postgres:postgres "$@"; fi; }

# Loads STATE_DIR/patroni/cluster.env: PATRONI_NODES, PATRONI_ETCD_PORT, PATRONI_ETCD_PEER_PORT,
# PATRONI_PG_PORTS and PATRONI_REST_PORTS (space-separated, node order), PATRONI_MODE.
_patroni_load() {
  local env_file
  env_file="$(_patroni_dir "$1")/cluster.env"
  [[ -f $env_file ]] || { echo "patroni: no cluster in $1 (patroni_start first)" >&2; return 1; }
  # shellcheck disable=SC1090
  source "$env_file"
}

_patroni_index() {
  [[ $1 =~ ^pg([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[1] <= PATRONI_NODES)) ||
    { echo "patroni: no node '$1' (have: $(_patroni_node_names))" >&2; return 1; }
  echo $((BASH_REMATCH[1] - 1))
}

_patroni_node_names() { local i; for ((i = 1; i <= PATRONI_NODES; i++)); do printf 'pg%d ' "$i"; done; }

patroni_nodes() { _patroni_load "$1" && _patroni_node_names | sed 's/ $//'; echo; }

# _patroni_port_of STATE_DIR NODE LIST: the node's entry of PATRONI_PG_PORTS or PATRONI_REST_PORTS.
_patroni_port_of() {
  _patroni_load "$1" || return 1
  local i ports
  i=$(_patroni_index "$2") || return 1
  read -r -a ports <<<"${!3}"
  echo "${ports[i]}"
}
patroni_pg_port() { _patroni_port_of "$1" "$2" PATRONI_PG_PORTS; }
patroni_rest_port() { _patroni_port_of "$1" "$2" PATRONI_REST_PORTS; }

patroni_url() {
  _patroni_load "$1" || return 1
  local p hosts=()
  for p in $PATRONI_PG_PORTS; do hosts+=("127.0.0.1:$p"); done
  local IFS=,
  echo "postgresql://postgres@${hosts[*]}/${2:-postgres}?target_session_attrs=read-write"
}

patroni_free_ports() { free_port_pairs $(($1 + 1)); }  # etcd's pair, then each node's

_patroni_mode_json() {
  case $1 in
    sync) echo '{"synchronous_mode": true, "synchronous_mode_strict": false}' ;;
    strict) echo '{"synchronous_mode": true, "synchronous_mode_strict": true}' ;;
    async) echo '{"synchronous_mode": false, "synchronous_mode_strict": false}' ;;
    *) echo "patroni: replication mode '$1' is none of sync, strict, async" >&2; return 1 ;;
  esac
}

_patroni_write_config() {
  local state=$1 node=$2 pg_port rest_port dir mode_json
  dir="$(_patroni_dir "$state")/$node"
  pg_port=$(patroni_pg_port "$state" "$node")
  rest_port=$(patroni_rest_port "$state" "$node")
  mode_json=$(_patroni_mode_json "$PATRONI_MODE")
  local fsync=on
  [[ ${PATRONI_FAST:-0} == 1 ]] && fsync=off
  # JSON is YAML: the mode's flags go in as they are.
  cat >"$dir/patroni.yml" <<EOF
# Generated by deploy/local/lib/patroni.sh on every start; edits are lost.
scope: charge-outbox
name: $node
log: {level: WARNING}
# No /dev/watchdog here; without this line Patroni warns about it every start.
watchdog: {mode: "off"}
restapi: {listen: "127.0.0.1:$rest_port", connect_address: "127.0.0.1:$rest_port"}
etcd3: {hosts: "127.0.0.1:$PATRONI_ETCD_PORT"}
bootstrap:
  dcs:
    ttl: ${PATRONI_TTL:-10}
    loop_wait: ${PATRONI_LOOP_WAIT:-1}
    retry_timeout: ${PATRONI_RETRY_TIMEOUT:-4}
    maximum_lag_on_failover: 1048576
    # With etcd lost, the primary stays primary as long as it reaches every other member's REST API:
    # without it Patroni demotes the primary retry_timeout after its last DCS write, and losing the DCS
    # alone stops every write (docs/decisions.md, "Patroni's DCS failsafe").
    failsafe_mode: true
    synchronous_mode: $(jq -r .synchronous_mode <<<"$mode_json")
    synchronous_mode_strict: $(jq -r .synchronous_mode_strict <<<"$mode_json")
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        max_wal_senders: 10
        max_replication_slots: 10
        wal_log_hints: "on"
        hot_standby: "on"
        wal_keep_size: 128MB
  initdb: [{encoding: UTF8}, {locale: C.UTF-8}, {auth: trust}]
postgresql:
  listen: "127.0.0.1:$pg_port"
  connect_address: "127.0.0.1:$pg_port"
  data_dir: "$dir/data"
  bin_dir: "$PG_BIN"
  pgpass: "$dir/pgpass"
  # Loopback is trusted, as in postgres.sh; the passwords are never asked for.
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: postgres, password: postgres}
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: "$dir"
    shared_buffers: 128MB
    fsync: "$fsync"
    logging_collector: "on"
    log_directory: "$dir"
    log_filename: postgresql.log
    log_min_messages: warning
    log_line_prefix: "%m [%p] %d "
  # A killed primary that comes back has WAL the new one never got: rewind it, or copy it again.
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
EOF
}

_patroni_live_pid() {
  local pid_file=$1 pid
  [[ -f $pid_file ]] || return 1
  pid=$(<"$pid_file")
  _patroni_alive "$pid" && [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") == *"$2"* ]] || return 1
  echo "$pid"
}

patroni_start_etcd() {
  _patroni_load "$1" || return 1
  local dir cmd=()
  dir="$(_patroni_dir "$1")/etcd"
  _patroni_live_pid "$dir/etcd.pid" "$dir/data" >/dev/null && return 0
  # A killed one's pid file: start_daemon would take its zombie for a live process.
  rm -f "$dir/etcd.pid"
  mkdir -p "$dir"
  _patroni_chown "$dir"
  # etcd reads every ETCD_* variable of its environment as a flag (the stack's ETCD_PORT, say).
  local var unset=()
  for var in $(compgen -e | grep '^ETCD_' || true); do unset+=(-u "$var"); done
  mapfile -d '' cmd < <(_patroni_owner_cmd "$dir" "${unset[@]}")
  start_daemon "$dir/etcd.pid" "$dir/etcd.log" "${cmd[@]}" "$ETCD_BIN" --name etcd1 --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$PATRONI_ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$PATRONI_ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$PATRONI_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PATRONI_ETCD_PEER_PORT" \
    --initial-cluster "etcd1=http://127.0.0.1:$PATRONI_ETCD_PEER_PORT" \
    --initial-cluster-token charge-outbox --initial-cluster-state new \
    --logger zap --log-level warn
  wait_http "http://127.0.0.1:$PATRONI_ETCD_PORT/health" 30
}

patroni_start_node() {
  _patroni_load "$1" || return 1
  local state=$1 node=$2 dir cmd=()
  _patroni_index "$node" >/dev/null || return 1
  dir="$(_patroni_dir "$state")/$node"
  _patroni_live_pid "$dir/patroni.pid" "$dir/patroni.yml" >/dev/null && return 0
  rm -f "$dir/patroni.pid"  # as in patroni_start_etcd
  mkdir -p "$dir"
  _patroni_chown "$dir"
  _patroni_write_config "$state" "$node"
  # Whatever the caller's umask (the stack's is 077 after its secrets), Patroni must read it.
  _patroni_chown "$dir/patroni.yml"
  mapfile -d '' cmd < <(_patroni_owner_cmd "$dir")
  start_daemon "$dir/patroni.pid" "$dir/patroni.log" "${cmd[@]}" "$PATRONI_BIN" "$dir/patroni.yml"
  wait_http "http://127.0.0.1:$(patroni_rest_port "$state" "$node")/liveness" 30
}

patroni_start() {
  local state=$1 mode=${2:-sync}
  (($# == 2 || $# >= 5)) || { echo "usage: patroni_start STATE_DIR MODE [ETCD:PEER PG:REST PG:REST ...]" >&2; return 2; }
  _patroni_mode_json "$mode" >/dev/null || return 2
  mkdir -p "$(_patroni_dir "$state")"
  chmod 755 "$state" "$(_patroni_dir "$state")"
  local env_file
  env_file="$(_patroni_dir "$state")/cluster.env"
  if [[ ! -f $env_file ]]; then
    (($# >= 5)) || { echo "patroni_start: a new cluster needs its ports (ETCD:PEER PG:REST PG:REST ...)" >&2; return 2; }
    local spec pg=() rest=()
    for spec in "${@:4}"; do pg+=("${spec%%:*}"); rest+=("${spec##*:}"); done
    {
      echo "PATRONI_NODES=$(($# - 3))"
      echo "PATRONI_ETCD_PORT=${3%%:*}"
      echo "PATRONI_ETCD_PEER_PORT=${3##*:}"
      echo "PATRONI_PG_PORTS='${pg[*]}'"
      echo "PATRONI_REST_PORTS='${rest[*]}'"
      echo "PATRONI_MODE=$mode"
    } >"$env_file"
  fi
  _patroni_load "$state"
  patroni_start_etcd "$state"
  local node
  for node in $(_patroni_node_names); do patroni_start_node "$state" "$node"; done
  [[ $PATRONI_MODE == "$mode" ]] || patroni_set_mode "$state" "$mode"
  patroni_wait_healthy "$state" 90
}

# Every node running, one leader and, unless asynchronous, a synchronous standby: the state in which a
# commit acknowledged to a client is on two nodes.
patroni_wait_healthy() {
  _patroni_load "$1" || return 1
  local timeout=${2:-60} start=$SECONDS node filter
  filter='[.members[] | select(.state == "running")] as $up | ($up | length) == $n
    and ($up | map(select(.role == "leader")) | length) == 1
    and ($async or ($up | map(select(.role == "sync_standby")) | length) >= 1)'
  while ((SECONDS - start < timeout)); do
    for node in $(_patroni_node_names); do
      curl -fsS --max-time 2 "http://127.0.0.1:$(patroni_rest_port "$1" "$node")/cluster" 2>/dev/null |
        jq -e --argjson n "$PATRONI_NODES" --argjson async "$([[ $PATRONI_MODE == async ]] && echo true || echo false)" \
          "$filter" >/dev/null && return 0
    done
    sleep 0.3
  done
  echo "patroni_wait_healthy: the cluster in $1 is not whole after ${timeout}s:" >&2
  curl -fsS --max-time 2 "http://127.0.0.1:$(patroni_rest_port "$1" pg1)/cluster" >&2 2>/dev/null || true
  return 1
}

patroni_set_mode() {
  _patroni_load "$1" || return 1
  local json node
  json=$(_patroni_mode_json "$2") || return 1
  for node in $(_patroni_node_names); do
    if curl -fsS -o /dev/null --max-time 5 -X PATCH -d "$json" \
      "http://127.0.0.1:$(patroni_rest_port "$1" "$node")/config"; then
      sed -i "s/^PATRONI_MODE=.*/PATRONI_MODE=$2/" "$(_patroni_dir "$1")/cluster.env"
      return 0
    fi
  done
  echo "patroni_set_mode: no node took the configuration" >&2
  return 1
}

# GET /primary answers 200 only on the node that runs as primary and holds the leader lock.
patroni_primary() {
  _patroni_load "$1" || return 1
  local node
  for node in $(_patroni_node_names); do
    if curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(patroni_rest_port "$1" "$node")/primary" 2>/dev/null; then
      echo "$node"
      return 0
    fi
  done
  return 1
}

# A transaction that writes WAL and commits: it needs a primary that accepts writes and, while a
# synchronous standby is required (strict mode), its confirmation. Each try is bounded: a primary that
# waits for a standby counts as not writable. A transactional logical message writes WAL without a table;
# `SELECT txid_current()` would not do: a commit without WAL does not wait for the standby.
patroni_wait_writable() {
  local state=$1 timeout=${2:-60} url start=$SECONDS
  url=$(patroni_url "$state") || return 1
  while ((SECONDS - start < timeout)); do
    if PGCONNECT_TIMEOUT=2 timeout 5 psql -X -q -tA "$url" -c "SELECT pg_logical_emit_message(true, 'patroni.sh', 'writable')" >/dev/null 2>&1; then
      echo $((SECONDS - start))
      return 0
    fi
    sleep 0.2
  done
  echo "patroni_wait_writable: no write committed through $url within ${timeout}s" >&2
  return 1
}

# The postmaster's pid, from its own pid file, if it is alive and a postgres.
_patroni_postmaster_pid() {
  local data pid
  data="$(_patroni_dir "$1")/$2/data"
  [[ -f $data/postmaster.pid ]] || return 1
  pid=$(head -n 1 "$data/postmaster.pid")
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == postgres ]] || return 1
  echo "$pid"
}

# The postmaster and every process it forked: a crash takes them all (orphaned backends would keep the
# shared memory in use and block the restart).
_patroni_kill_postgres_tree() {
  local pm children
  pm=$(_patroni_postmaster_pid "$1" "$2") || return 0
  children=$(ps -o pid= --ppid "$pm" | tr -d ' ' | tr '\n' ' ')
  # shellcheck disable=SC2086 # a list of pids
  kill -KILL "$pm" $children 2>/dev/null || true
  local i
  for ((i = 0; i < 50; i++)); do _patroni_alive "$pm" || break; sleep 0.1; done
}

patroni_kill_postgres() {
  _patroni_load "$1" && _patroni_index "$2" >/dev/null || return 1
  _patroni_postmaster_pid "$1" "$2" >/dev/null || { echo "patroni_kill_postgres: $2 has no running postgres" >&2; return 1; }
  _patroni_kill_postgres_tree "$1" "$2"
}

patroni_kill_node() {
  _patroni_load "$1" && _patroni_index "$2" >/dev/null || return 1
  local dir pid
  dir="$(_patroni_dir "$1")/$2"
  # Patroni first, so that it cannot start its PostgreSQL again.
  if pid=$(_patroni_live_pid "$dir/patroni.pid" "$dir/patroni.yml"); then kill -KILL "$pid"; fi
  _patroni_kill_postgres_tree "$1" "$2"
}

patroni_kill_etcd() {
  _patroni_load "$1" || return 1
  local dir pid
  dir="$(_patroni_dir "$1")/etcd"
  if pid=$(_patroni_live_pid "$dir/etcd.pid" "$dir/data"); then kill -KILL "$pid"; fi
}

# SIGTERM: Patroni stops its PostgreSQL (fast shutdown) and releases the leader key before it exits.
_patroni_stop_node() {
  local dir pid
  dir="$(_patroni_dir "$1")/$2"
  if pid=$(_patroni_live_pid "$dir/patroni.pid" "$dir/patroni.yml"); then _patroni_term "$pid" 30 "$2's Patroni"; fi
  rm -f "$dir/patroni.pid"
  # A PostgreSQL whose Patroni was killed outlives it.
  if _patroni_postmaster_pid "$1" "$2" >/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
      runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    else
      "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
    _patroni_kill_postgres_tree "$1" "$2"
  fi
}

patroni_stop() {
  local state=$1 primary node port pid left=()
  [[ -f "$(_patroni_dir "$state")/cluster.env" ]] || return 0
  _patroni_load "$state"
  primary=$(patroni_primary "$state" || true)
  for node in $(_patroni_node_names); do
    [[ $node == "$primary" ]] || _patroni_stop_node "$state" "$node"
  done
  [[ -z $primary ]] || _patroni_stop_node "$state" "$primary"
  local etcd_dir
  etcd_dir="$(_patroni_dir "$state")/etcd"
  if pid=$(_patroni_live_pid "$etcd_dir/etcd.pid" "$etcd_dir/data"); then _patroni_term "$pid" 20 etcd; fi
  rm -f "$etcd_dir/etcd.pid"
  for port in $PATRONI_ETCD_PORT $PATRONI_ETCD_PEER_PORT $PATRONI_PG_PORTS $PATRONI_REST_PORTS; do
    port_in_use "$port" && left+=("$port")
  done
  ((${#left[@]} == 0)) || { echo "patroni_stop: still listening after the stop: ports ${left[*]}" >&2; return 1; }
}

# A PostgreSQL 15 server of our own, from its own data directory, on loopback. Never the system
# cluster. Sourced; needs common.sh.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

# Postgres refuses to run as root; as root we run it as the `postgres` user, otherwise as ourselves.
_pg_as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# pg_start STATE_DIR PORT [fast]
# `fast` turns off fsync for throwaway test clusters: a process crash loses nothing without it, only
# an OS crash would, and tests never survive one anyway. PG_EXTRA_SETTINGS (postgresql.conf lines) is
# appended last: the benchmarks use it to run a tuned, still durable, server. PG_LISTEN_ADDRESSES (default
# loopback) and PG_TRUST_CIDR (a network whose clients are trusted, as loopback's are) serve a server that
# pods on a test cluster's node reach through the node's address; PG_PASSWORD_CIDRS (space-separated)
# are networks whose clients must give their role's password (scram-sha-256), as a real server's would.
pg_start() {
  local state=$1 port=$2 mode=${3:-durable}
  local dir=$state/postgres data=$state/postgres/data
  if pg_running "$state" "$port"; then return 0; fi
  # A pid file whose pid is no longer a postgres (it died, and the pid went to another process) would make
  # the server refuse to start: "lock file already exists".
  if [[ -f $data/postmaster.pid ]] && [[ $(cat "/proc/$(head -n 1 "$data/postmaster.pid")/comm" 2>/dev/null) != postgres ]]; then
    rm -f "$data/postmaster.pid"
  fi
  mkdir -p "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$dir"
  if [[ ! -f $data/PG_VERSION ]]; then
    _pg_as_owner "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  fi
  {
    echo "listen_addresses = '${PG_LISTEN_ADDRESSES:-127.0.0.1}'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir'"
    echo "max_connections = 300"
    echo "shared_buffers = 256MB"
    echo "log_min_messages = warning"
    echo "log_line_prefix = '%m [%p] %d '"
    if [[ $mode == fast ]]; then
      echo "fsync = off"
      echo "full_page_writes = off"
      echo "synchronous_commit = off"
    fi
    if [[ -n ${PG_EXTRA_SETTINGS:-} ]]; then printf '%s\n' "$PG_EXTRA_SETTINGS"; fi
  } >"$data/postgresql.auto.conf"
  if [[ -n ${PG_TRUST_CIDR:-} ]] && ! grep -qF "host all all $PG_TRUST_CIDR trust" "$data/pg_hba.conf"; then
    echo "host all all $PG_TRUST_CIDR trust" >>"$data/pg_hba.conf"
  fi
  local cidr
  for cidr in ${PG_PASSWORD_CIDRS:-}; do
    grep -qF "host all all $cidr scram-sha-256" "$data/pg_hba.conf" ||
      echo "host all all $cidr scram-sha-256" >>"$data/pg_hba.conf"
  done
  _pg_as_owner "$PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
    { tail -n 20 "$dir/server.log" >&2; die "PostgreSQL did not start (log: $dir/server.log)"; }
  head -n 1 "$data/postmaster.pid" >"$data/postmaster.pid.ours"
}

pg_stop() {
  local data=$1/postgres/data
  if pid_alive "$data/postmaster.pid.ours"; then
    _pg_as_owner "$PG_BIN/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null || stop_pid_file "$data/postmaster.pid.ours"
  fi
  rm -f "$data/postmaster.pid.ours"
}

# pg_running STATE_DIR PORT: our server answers on its port. Its pid file alone is not enough: the pid
# may have gone to another process since the server died.
pg_running() {
  pid_alive "$1/postgres/data/postmaster.pid.ours" && "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$2" -t 2
}

pg_url() { echo "postgresql://postgres@127.0.0.1:$1/${2:-postgres}"; }

# Runs psql against database $2 on port $1 with the rest as arguments, stopping on the first error.
pg_psql() {
  local port=$1 db=$2; shift 2
  psql -X -q -v ON_ERROR_STOP=1 "$(pg_url "$port" "$db")" "$@"
}

# psql interpolates :'var' only in scripts read from stdin or a file, not in -c, hence the here-strings.
pg_ensure_database() {
  local port=$1 db=$2
  if [[ -z $(pg_psql "$port" postgres -tA -v db="$db" <<<"SELECT 1 FROM pg_database WHERE datname = :'db'") ]]; then
    pg_psql "$port" postgres -v db="$db" <<<'CREATE DATABASE :"db"'
  fi
}

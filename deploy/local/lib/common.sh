# Shared helpers for the local stack and the test runner. Sourced; the caller sets `set -euo pipefail`.

CHARGE_OUTBOX_ROOT=${CHARGE_OUTBOX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
CHARGE_OUTBOX_CACHE=${CHARGE_OUTBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/charge-outbox}

say() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

port_in_use() { [[ -n $(ss -Htln "sport = :$1" 2>/dev/null) ]]; }

# A free TCP port on loopback. Random rather than "bind port 0" because the port is handed to a server
# started later; two runs at once pick different ones with high probability, and the server's own bind
# fails loudly if not. The range ends below the kernel's ephemeral ports: there, any outgoing connection
# made in between (tests make thousands) can take the port before the server binds it.
free_port() {
  local p low=32768
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  ((low > 20000 + 2000)) || die "the ephemeral port range starts at $low: no room below it for servers"
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % (low - 20000)))
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  die "no free port found between 20000 and $low"
}

# free_port_pairs N: N pairs "A:B" of free ports, all 2N distinct (a cluster's nodes, each with two ports).
free_port_pairs() {
  local taken=" " out=() p i pair
  for ((i = 0; i < $1; i++)); do
    pair=""
    while [[ $pair != *:* ]]; do
      p=$(free_port)
      [[ $taken == *" $p "* ]] && continue
      taken+="$p "
      pair=${pair:+$pair:}$p
    done
    out+=("$pair")
  done
  echo "${out[*]}"
}

# True if the process exists and is not a zombie: kill -0 succeeds on a zombie, and on a machine whose init
# reaps orphans late a SIGKILLed daemon stays one long enough to look alive (a restart then did nothing).
process_alive() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ $state != Z ]]
}

# True if the pid file names a live process.
pid_alive() { [[ -f $1 ]] && process_alive "$(cat "$1")"; }

# Stops the process named by a pid file: SIGTERM, up to `timeout` seconds, then SIGKILL. A process that
# start_daemon started leads its own process group, so the group is signalled too: a timer loop's
# running child stops with it.
stop_pid_file() {
  local pid_file=$1 timeout=${2:-20} pid
  [[ -f $pid_file ]] || return 0
  pid=$(cat "$pid_file")
  # A zombie leader may still have a live group (a timer loop's child): signalled all the same.
  if kill -0 "$pid" 2>/dev/null; then
    if [[ $(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ') == "$pid" ]]; then
      kill -TERM -- "-$pid" 2>/dev/null || true
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((timeout * 10))); do
      process_alive "$pid" || break
      sleep 0.1
    done
    if process_alive "$pid"; then
      say "pid $pid did not stop within ${timeout}s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pid_file"
}

# The compiler launcher of every C++ tree: ccache keyed on paths relative to the source tree (base_dir) and
# not on the build's directory (hash_dir off), so a clean clone elsewhere on the same machine (CI's) reuses
# the objects another clone compiled. The price: a cached object's debug info names the directory of the
# build that made it. Empty without ccache.
ccache_launcher() {
  command -v ccache >/dev/null || return 0
  printf '%s\n' "-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$CHARGE_OUTBOX_ROOT;CCACHE_NOHASHDIR=true;ccache"
}

# Configures and builds the tree (incremental: a no-op when nothing changed).
build_tree() {
  local build_dir=$1; shift
  local launcher=()
  mapfile -t launcher < <(ccache_launcher)
  if [[ ! -f $build_dir/build.ninja ]]; then
    cmake -S "$CHARGE_OUTBOX_ROOT" -B "$build_dir" -G Ninja "${launcher[@]}" "$@" >&2
  fi
  cmake --build "$build_dir" >&2
}

# start_daemon PID_FILE LOG_FILE COMMAND [ARGS...]
# Starts COMMAND in its own session (a Ctrl-C in the caller's terminal does not reach it), logging to
# LOG_FILE. The inner shell writes its own pid and then execs, so the pid file names exactly the
# daemon. No-op if the pid file already names a live process.
start_daemon() {
  local pid_file=$1 log_file=$2; shift 2
  pid_alive "$pid_file" && return 0
  mkdir -p "$(dirname "$pid_file")" "$(dirname "$log_file")"
  # shellcheck disable=SC2016 # expanded by the inner bash, on purpose
  setsid -f bash -c 'echo "$$" >"$0.tmp" && mv -f "$0.tmp" "$0" && exec "$@"' "$pid_file" "$@" \
    </dev/null >>"$log_file" 2>&1
  for _ in $(seq 1 50); do
    [[ -f $pid_file ]] && break
    sleep 0.05
  done
  [[ -f $pid_file ]] || die "$(basename "$1") did not start; see $log_file"
}

# wait_http URL [TIMEOUT_S]: until URL answers 2xx.
wait_http() {
  local url=$1 timeout=${2:-30} deadline=$((SECONDS + ${2:-30}))
  while ((SECONDS < deadline)); do
    curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  die "$url did not answer within ${timeout}s"
}

# 32 random bytes as hex: API keys and credentials for the local stack.
random_hex() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }

# shellcheck shell=bash
# Local single-node Kafka (KRaft, combined broker+controller) for dev, tests
# and benchmarks. Sourced, not executed; the caller has `set -euo pipefail`.
#
# There is no Kafka tarball on this network, only Maven Central, so the broker
# is assembled from Maven artifacts (deploy/local/kafka/pom.xml) and run with
# plain `java -cp`. Needs: bash, java (17+), mvn, util-linux (setsid, flock).
#
#   kafka_fetch_jars                          jars into the cache (idempotent)
#   kafka_start STATE_DIR PORT CONTROLLER_PORT   (KAFKA_ADVERTISED_PORT: the port clients are told to
#                                              use, when a proxy stands in front of PORT)
#   kafka_wait  PORT [TIMEOUT_S=60] [STATE_DIR]
#   kafka_stop  STATE_DIR
#   kafka_java_cp                             prints the java classpath
#   kafka_run_class CLASS [ARGS...]           runs a Kafka tool class, quiet logging
#
# Example:
#   kafka_start "$state" 19092 19093 && kafka_wait 19092
#   kafka_run_class org.apache.kafka.tools.ProducerPerformance --topic t ...

_KAFKA_POM="$(cd "$(dirname "${BASH_SOURCE[0]}")/../kafka" && pwd)/pom.xml"

# The pom is the single place the version lives, so bumping it there is enough.
_kafka_version() {
  sed -n 's:.*<kafka\.version>\(.*\)</kafka\.version>.*:\1:p' "$_KAFKA_POM" | head -n 1
}

_kafka_cache() {
  printf '%s\n' "${CHARGE_OUTBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/charge-outbox}"
}

_kafka_home() {
  printf '%s/kafka-%s\n' "$(_kafka_cache)" "$(_kafka_version)"
}

kafka_fetch_jars() {
  local home key
  home="$(_kafka_home)"
  # Keyed on the pom's content, not just the version: editing the dependency
  # list (e.g. the log4j binding) must invalidate the cache too.
  key="$(sha256sum "$_KAFKA_POM")"
  key="${key%% *}"
  if [[ -f "$home/libs.complete" && "$(<"$home/libs.complete")" == "$key" ]]; then
    return 0
  fi
  if ! command -v mvn >/dev/null 2>&1; then
    echo "kafka_fetch_jars: mvn not found (apt-get install maven)" >&2
    return 1
  fi
  mkdir -p "$home"
  # Locked because parallel callers (two test shells) would otherwise swap
  # libs/ under each other; copy to a temp dir first so a failed or killed
  # mvn never leaves a half-filled libs/ that looks usable.
  (
    flock 9
    if [[ -f "$home/libs.complete" && "$(<"$home/libs.complete")" == "$key" ]]; then
      exit 0
    fi
    tmp="$(mktemp -d "$home/libs.tmp.XXXXXX")"
    if ! mvn -B -q -f "$_KAFKA_POM" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp" >"$home/fetch.log" 2>&1; then
      rm -rf "$tmp"
      echo "kafka_fetch_jars: mvn could not fetch Kafka $(_kafka_version) jars; see $home/fetch.log" >&2
      exit 1
    fi
    rm -rf "$home/libs" "$home/libs.complete"
    mv "$tmp" "$home/libs"
    printf '%s\n' "$key" >"$home/libs.complete"
  ) 9>"$home/.fetch.lock"
}

kafka_java_cp() {
  local home
  home="$(_kafka_home)"
  if [[ ! -f "$home/libs.complete" ]]; then
    echo "kafka_java_cp: Kafka jars not fetched yet; run kafka_fetch_jars" >&2
    return 1
  fi
  # A java classpath wildcard, expanded by java itself, not by the shell.
  printf '%s/libs/*\n' "$home"
}

# Tools get a log4j2 config that sends WARN+ to stderr: without one, log4j's
# default writes to stdout and would mix with ConsoleConsumer's output.
_kafka_tools_log4j() {
  local f
  f="$(_kafka_home)/tools-log4j2.xml"
  if [[ ! -f "$f" ]]; then
    cat >"$f.$$" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="stderr" target="SYSTEM_ERR">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="stderr"/></Root>
  </Loggers>
</Configuration>
EOF
    mv -f "$f.$$" "$f"
  fi
  printf '%s\n' "$f"
}

# KAFKA_TOOLS_JAVA_OPTS (word-split) adds JVM flags, e.g. "-Xmx1g" for a benchmark.
kafka_run_class() {
  local cp log4j opts=()
  cp="$(kafka_java_cp)" || return 1
  log4j="$(_kafka_tools_log4j)"
  read -r -a opts <<<"${KAFKA_TOOLS_JAVA_OPTS:-}"
  java "${opts[@]}" -Dlog4j2.configurationFile="$log4j" -cp "$cp" "$@"
}

# Prints the broker's pid if STATE_DIR/kafka.pid names a live broker started
# from this STATE_DIR. Checking the command line (not just kill -0) guards
# against a recycled pid and against zombies, whose cmdline is empty.
_kafka_live_pid() {
  local state_dir="$1" pid cmdline
  [[ -f "$state_dir/kafka.pid" ]] || return 1
  pid="$(<"$state_dir/kafka.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *" kafka.Kafka $state_dir/kafka/server.properties"* ]] || return 1
  printf '%s\n' "$pid"
}

_kafka_new_cluster_id() {
  # Same shape as org.apache.kafka.common.Uuid.toString(): 16 random bytes,
  # URL-safe base64 without padding. A leading '-' would parse as a CLI flag.
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* ]] && break
  done
  printf '%s\n' "$id"
}

# The clients' listener: loopback, or KAFKA_LISTEN_ADDRESS (a real node's pods reach the host's broker at
# the node's address; the controller stays on loopback). The same variable must be set for kafka_wait.
_kafka_address() { printf '%s\n' "${KAFKA_LISTEN_ADDRESS:-127.0.0.1}"; }

_kafka_write_config() {
  local kdir="$1" port="$2" cport="$3"
  cat >"$kdir/server.properties" <<EOF
# Generated by deploy/local/lib/kafka.sh on every start; edits are lost.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://$(_kafka_address):$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://$(_kafka_address):${KAFKA_ADVERTISED_PORT:-$port},CONTROLLER://127.0.0.1:$cport
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
# Dynamic quorum (formatted with --standalone). Must not be combined with
# controller.quorum.voters: the formatter rejects the mix (KAFKA-18987).
controller.quorum.bootstrap.servers=127.0.0.1:$cport
log.dirs=$kdir/data

num.partitions=3
# One node: internal topics cannot have more replicas than that.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Defaults (50 partitions each) cost seconds on the first group join or
# transaction on a 2-core box, for nothing on a single node.
offsets.topic.num.partitions=5
transaction.state.log.num.partitions=5
# Tests join consumer groups constantly; the default 3 s delay is pure wait.
group.initial.rebalance.delay.ms=0
EOF
  # More broker settings, one per line (an authorizer for a test of ACLs, say).
  [[ -z ${KAFKA_EXTRA_PROPERTIES:-} ]] || printf '%s\n' "$KAFKA_EXTRA_PROPERTIES" >>"$kdir/server.properties"
  # One file for everything the broker logs (Kafka's stock config splits it
  # into controller.log, state-change.log, ...); size-capped for long runs.
  # shutdownHook=disable: log4j's own hook would otherwise stop logging in
  # the middle of Kafka's shutdown hook, hiding whether shutdown was clean.
  cat >"$kdir/log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn" shutdownHook="disable">
  <Appenders>
    <RollingFile name="server" fileName="${sys:kafka.logs.dir}/server.log"
                 filePattern="${sys:kafka.logs.dir}/server.log.%i">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <Policies><SizeBasedTriggeringPolicy size="50 MB"/></Policies>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
  </Loggers>
</Configuration>
EOF
}

kafka_start() {
  if (( $# != 3 )) || [[ ! "$2" =~ ^[0-9]+$ || ! "$3" =~ ^[0-9]+$ ]]; then
    echo "usage: kafka_start STATE_DIR PORT CONTROLLER_PORT" >&2
    return 2
  fi
  local state_dir port="$2" cport="$3" kdir cp i
  # Absolute, because the pid check and the broker's config must not depend
  # on the caller's working directory.
  mkdir -p "$1"
  state_dir="$(cd "$1" && pwd)"
  kdir="$state_dir/kafka"

  if _kafka_live_pid "$state_dir" >/dev/null; then
    return 0
  fi
  rm -f "$state_dir/kafka.pid"

  # A leftover broker on PORT would answer kafka_wait in place of this one.
  for i in "$port" "$cport"; do
    if (: <>"/dev/tcp/127.0.0.1/$i") 2>/dev/null; then
      echo "kafka_start: 127.0.0.1:$i is already in use (see: ss -ltnp 'sport = :$i')" >&2
      return 1
    fi
  done

  kafka_fetch_jars || return 1
  cp="$(kafka_java_cp)"
  mkdir -p "$kdir/data"

  # The controller endpoint is written into the KRaft voter set when the
  # storage is formatted, so it cannot change afterwards; the data port can.
  if [[ -f "$kdir/controller.port" && "$(<"$kdir/controller.port")" != "$cport" ]]; then
    echo "kafka_start: $state_dir was formatted with controller port $(<"$kdir/controller.port"), not $cport;" \
      "reuse that port or delete $kdir" >&2
    return 1
  fi

  _kafka_write_config "$kdir" "$port" "$cport"

  if [[ ! -f "$kdir/data/meta.properties" ]]; then
    [[ -s "$state_dir/kafka-cluster-id" ]] || _kafka_new_cluster_id >"$state_dir/kafka-cluster-id"
    if ! kafka_run_class kafka.tools.StorageTool format --standalone \
        --config "$kdir/server.properties" \
        --cluster-id "$(<"$state_dir/kafka-cluster-id")" >"$kdir/format.log" 2>&1; then
      echo "kafka_start: formatting $kdir/data failed:" >&2
      tail -n 20 "$kdir/format.log" >&2
      return 1
    fi
    printf '%s\n' "$cport" >"$kdir/controller.port"
  fi

  # setsid -f: own session, so the broker survives the caller's shell and
  # terminal, and a Ctrl-C in the caller does not reach it. The inner bash
  # records its own pid and then execs java, so the pid file is exact even
  # though setsid forks. stdout/stderr only catch what happens before log4j
  # is up (bad flags, crashes).
  # shellcheck disable=SC2016 # expanded by the inner bash, on purpose
  setsid -f bash -c 'echo "$$" >"$0.tmp" && mv -f "$0.tmp" "$0" && exec "$@"' \
    "$state_dir/kafka.pid" \
    java -Xms128m -Xmx384m \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true \
    -Dkafka.logs.dir="$kdir" -Dlog4j2.configurationFile="$kdir/log4j2.xml" \
    -cp "$cp" kafka.Kafka "$kdir/server.properties" \
    </dev/null >"$kdir/console.log" 2>&1

  # Until the inner bash has exec'd java, the pid does not look like a broker.
  for ((i = 0; i < 50; i++)); do
    _kafka_live_pid "$state_dir" >/dev/null && break
    sleep 0.1
  done
  if ! _kafka_live_pid "$state_dir" >/dev/null; then
    echo "kafka_start: broker did not launch; see $kdir/console.log" >&2
    tail -n 20 "$kdir/console.log" >&2
    return 1
  fi

  # Lets kafka_wait, possibly in another shell, find the log to show on failure.
  mkdir -p "$(_kafka_cache)/kafka-ports"
  printf '%s\n' "$state_dir" >"$(_kafka_cache)/kafka-ports/$port"
}

# Ready means a real client got cluster metadata listing our broker as
# registered and unfenced: the broker accepts requests slightly before the
# controller unfences it, and topic creation fails in that window.
# BrokerApiVersionsCommand (kafka-broker-api-versions.sh) only lists
# unfenced brokers, as "<host>:<port> (id: 1 rack: ... ) -> (...)".
_kafka_probe() {
  local port="$1" out
  out="$(KAFKA_TOOLS_JAVA_OPTS="-Xmx64m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
    kafka_run_class org.apache.kafka.tools.BrokerApiVersionsCommand \
    --bootstrap-server "$(_kafka_address):$port" 2>/dev/null)" || return 1
  [[ "$out" == *"$(_kafka_address):${KAFKA_ADVERTISED_PORT:-$port} (id: "* && "$out" != *"isFenced: true"* ]]
}

kafka_wait() {
  if (( $# < 1 || $# > 3 )) || [[ ! "$1" =~ ^[0-9]+$ ]]; then
    echo "usage: kafka_wait PORT [TIMEOUT_S] [STATE_DIR]" >&2
    return 2
  fi
  local port="$1" timeout="${2:-60}" state_dir="${3:-}" deadline
  if [[ -z "$state_dir" && -f "$(_kafka_cache)/kafka-ports/$port" ]]; then
    state_dir="$(<"$(_kafka_cache)/kafka-ports/$port")"
  fi
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    if [[ -n "$state_dir" ]] && ! _kafka_live_pid "$state_dir" >/dev/null; then
      echo "kafka_wait: broker for port $port ($state_dir) is not running" >&2
      _kafka_log_tail "$state_dir"
      return 1
    fi
    # Each probe is a JVM start (~1 s of CPU the starting broker also
    # wants), so only probe once something listens on the port.
    if (: <>"/dev/tcp/$(_kafka_address)/$port") 2>/dev/null && _kafka_probe "$port"; then
      return 0
    fi
    sleep 0.3
  done
  echo "kafka_wait: broker on $(_kafka_address):$port not ready after ${timeout}s" >&2
  [[ -z "$state_dir" ]] || _kafka_log_tail "$state_dir"
  return 1
}

_kafka_log_tail() {
  local kdir="$1/kafka" f
  for f in "$kdir/server.log" "$kdir/console.log"; do
    if [[ -s "$f" ]]; then
      echo "--- last lines of $f ---" >&2
      tail -n 30 "$f" >&2
    fi
  done
}

kafka_stop() {
  if (( $# != 1 )); then
    echo "usage: kafka_stop STATE_DIR" >&2
    return 2
  fi
  local state_dir pid i
  [[ -d "$1" ]] || return 0
  state_dir="$(cd "$1" && pwd)"
  if ! pid="$(_kafka_live_pid "$state_dir")"; then
    rm -f "$state_dir/kafka.pid"
    return 0
  fi
  # SIGTERM runs Kafka's shutdown hook: controlled shutdown and a clean
  # flush, so the next start skips log recovery.
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    _kafka_live_pid "$state_dir" >/dev/null || break
    sleep 0.1
  done
  if _kafka_live_pid "$state_dir" >/dev/null; then
    echo "kafka_stop: broker pid $pid ignored SIGTERM for 20s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      _kafka_live_pid "$state_dir" >/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$state_dir/kafka.pid"
}

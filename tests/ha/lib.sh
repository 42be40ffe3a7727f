# shellcheck shell=bash
# What the tests/ha scripts share: the local stack's libraries they stand on (PostgreSQL, Kafka's jars, the
# three KRaft brokers) and their small helpers. Sourced by a script that has set `root` (the repository)
# and `set -euo pipefail`.
source "$root/deploy/local/lib/common.sh"
source "$root/deploy/local/lib/postgres.sh"
source "$root/deploy/local/lib/kafka.sh"
source "$root/deploy/local/lib/kafka_cluster.sh"

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$SECONDS" >&2; }
now() { date +%s.%N; }
# Seconds (one decimal) since an epoch from `now`.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# topic_records BOOTSTRAP TOPIC: the records on TOPIC, the sum of its partitions' end offsets.
topic_records() {
  KAFKA_TOOLS_JAVA_OPTS="-Xmx64m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
    kafka_run_class org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$1" --topic "$2" 2>/dev/null |
    awk -F: '{ s += $3 } END { print s + 0 }'
}

# require_executables HINT FILE...: fails naming HINT unless every FILE is executable.
require_executables() {
  local hint=$1 f
  shift
  for f in "$@"; do [[ -x $f ]] || fail "$f is missing: $hint"; done
}

# new_work_dir NAME: a fresh directory under /var/tmp, readable by all: the postgres user (when root) must
# reach the data directories in it.
new_work_dir() {
  local dir
  dir=$(mktemp -d "/var/tmp/charge-outbox-$1.XXXXXX")
  chmod 755 "$dir"
  echo "$dir"
}

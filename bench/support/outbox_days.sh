# Sourced by the benchmarks' scripts.
#
# outbox_days_as_in_production PG_PORT DATABASE BUILD_DIR: gives the outbox the days a running system has:
# HISTORY_DAYS (7) of published days behind today and migration 0001's seven days ahead, as a week-old
# install would have had them, then one retention pass of the relay (its defaults, or RETENTION_DAYS and
# RETENTION_DAYS_AHEAD from the environment) makes of them what production's relay makes: the published
# past moved to outbox_history, the days ahead cut to retention.days_ahead. Every partition left under
# `outbox` costs each claim of the relay (docs/outbox-relay.md, "Retention"). RETENTION_PASS=0 leaves
# them all under `outbox`, as retention left them before migration 0010. Needs DATABASE_URL.
outbox_days_as_in_production() {
  local port=$1 database=$2 build_dir=$3 history_days=${HISTORY_DAYS:-7}
  pg_psql "$port" "$database" <<<"SELECT outbox_ensure_partitions(current_date - $history_days, current_date + 7)" >/dev/null
  if [[ ${RETENTION_PASS:-1} != 0 ]]; then
    "$build_dir/services/outbox-relay/outbox-relay" retention >/dev/null || die "outbox-relay retention failed"
  fi
  say "outbox partitions: $(pg_psql "$port" "$database" -tA <<<"SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox'::regclass")"\
"; in outbox_history: $(pg_psql "$port" "$database" -tA <<<"SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox_history'::regclass")"
}

# Sourced by the benchmarks' scripts: PostgreSQL on cores of its own, as in production.
#
# In production the database has machines of its own; on a benchmark machine everything else (charge-api,
# acquirer-sim, the load generator, the relay, the Kafka broker) would otherwise take its cores, and a
# ratio against pgbench (whose client takes hardly any) would measure that sharing, not the database work
# each side asks for. split_cpus divides the CPUs this process may use into two halves, the first for
# PostgreSQL (DB_CPUS), the rest for everything else (OTHER_CPUS), and moves this shell, and so everything
# it starts from now on, to the second; pin_postgres POSTMASTER_PID moves PostgreSQL to the first (the
# backends and workers the postmaster forks later inherit it). With fewer than 2 CPUs nothing is split:
# split_cpus returns 1.

# The CPUs this process may use, one per line (Cpus_allowed_list: "0-3,6").
allowed_cpus() {
  sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr ',' '\n' |
    awk -F- '{ last = NF > 1 ? $2 : $1; for (c = $1; c <= last; c++) print c }'
}

split_cpus() {
  local cpus
  mapfile -t cpus < <(allowed_cpus)
  ((${#cpus[@]} >= 2)) || return 1
  local half=$((${#cpus[@]} / 2))
  DB_CPUS=$(printf '%s\n' "${cpus[@]:0:half}" | paste -sd,)
  OTHER_CPUS=$(printf '%s\n' "${cpus[@]:half}" | paste -sd,)
  taskset -p -c "$OTHER_CPUS" $$ >/dev/null
}

pin_postgres() {
  local pid
  for pid in "$1" $(pgrep -P "$1"); do taskset -a -p -c "$DB_CPUS" "$pid" >/dev/null; done
}

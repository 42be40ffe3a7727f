# Sourced by the benchmarks' scripts.
#
# postgres_cpu_seconds POSTMASTER_PID: the CPU seconds (user + system) of every process of one PostgreSQL
# server so far: the postmaster's own, its ended children's (cutime/cstime: the backends, autovacuum workers
# and others that exited and were waited for) and its live children's (the WAL writer, the checkpointer,
# the backends). The difference of two readings is what the server spent between them, vacuum and WAL
# included. steady_load.cpp reads the same fields.
postgres_cpu_seconds() {
  local postmaster=$1
  # /proc/PID/stat: after the command in parentheses (which may hold spaces), field 4 is the parent and
  # fields 14 to 17 are utime, stime, cutime and cstime in clock ticks.
  # A process may end between the glob and its read: cat then fails, and what it read is still right.
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="$postmaster" -v tick="$(getconf CLK_TCK)" '
    {
      pid = $1
      rest = $0
      sub(/^.*\) /, "", rest)
      n = split(rest, f, " ")
      if (n < 15) next
      if (pid == root) total += f[12] + f[13] + f[14] + f[15]
      else if (f[2] == root) total += f[12] + f[13]
    }
    END { printf "%.3f\n", total / tick }'
}

# Sourced by the benchmarks' scripts: where a phase's CPU went, process by process.
#
# process_cpu_seconds PID: the CPU seconds (user + system, all threads) one live process has used so far;
# 0 if it is gone. Fields as in postgres_cpu.sh.
process_cpu_seconds() {
  { cat "/proc/$1/stat" 2>/dev/null || echo "$1 (gone) X 0 0 0 0 0 0 0 0 0 0 0 0"; } |
    awk -v tick="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / tick }'
}

# machine_cpu_seconds: the CPU seconds all cores have spent busy so far (/proc/stat: user, nice, system,
# irq, softirq and steal; idle and iowait left out).
machine_cpu_seconds() {
  awk -v tick="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.3f\n", ($2 + $3 + $4 + $7 + $8 + $9) / tick }' /proc/stat
}

# cpus_busy_seconds LIST: the same for the CPUs in LIST alone ("0" or "0,2,3"; the machine's when empty),
# whichever processes used them.
cpus_busy_seconds() {
  awk -v tick="$(getconf CLK_TCK)" -v list="${1:-}" '
    BEGIN { n = split(list, c, ","); for (i = 1; i <= n; i++) want["cpu" c[i]] = 1 }
    (n == 0 && $1 == "cpu") || ($1 in want) { t += $2 + $3 + $4 + $7 + $8 + $9 }
    END { printf "%.3f\n", t / tick }' /proc/stat
}

# jit_cpu_seconds PID: the CPU seconds a JVM's JIT compiler threads (C1 and C2) have used so far; 0 if it
# is gone. A freshly started JVM (the Kafka broker) spends its first minute of load compiling, which a
# phase must not count as the work it serves (production's broker is long warm).
jit_cpu_seconds() {
  local task sum=0
  for task in /proc/"$1"/task/*; do
    [[ $(cat "$task/comm" 2>/dev/null) == C[12]\ CompilerThre* ]] || continue
    sum=$(awk -v s="$sum" '{ sub(/^.*\) /, ""); print s + $12 + $13 }' "$task/stat" 2>/dev/null || echo "$sum")
  done
  awk -v s="$sum" -v tick="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f\n", s / tick }'
}

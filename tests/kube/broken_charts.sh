#!/usr/bin/env bash
# What the real node proves that the kwok fake node cannot: for each deliberately broken chart below, the
# kwok install test (ctest helm_install) passes and the real-node release test (ctest
# helm_release_real_node) fails. Not in tests/run (about five minutes a case); run it after changing either
# test, to see that the real node still catches what only running the image shows.
#
#   tests/kube/broken_charts.sh ACQUIRER_SIM_BIN [CASE...]     default: every case
#
# Cases (each a sed over a copy of the repository's chart):
#   readiness-on-api-port   charge-api's readiness probe on its API port (8080), which serves no /readyz
#   config-key-refused      a charge-api config key the daemon does not know (charge.pending_overdue)
#   config-mounted-elsewhere  the config mounted at a path the daemons' --config does not name
#   liveness-on-a-missing-path  charge-api's liveness probe on a path the admin port does not serve: the pod
#                           is Ready, then restarted every 30 s
# Needs what both tests need (root, HELM_BIN, KUBE_BIN_DIR, CHARGE_OUTBOX_IMAGE: tests/run's exports).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
acquirer_sim=${1:?usage: broken_charts.sh ACQUIRER_SIM_BIN [CASE...]}
shift
cases=("$@")
((${#cases[@]})) || cases=(readiness-on-api-port config-key-refused config-mounted-elsewhere liveness-on-a-missing-path)

# break_chart CASE DIR: the breakage, applied to the chart in DIR; fails if the sed changed nothing.
break_chart() {
  local chart=$2/helm/charge-outbox before
  before=$(cat "$chart"/templates/*)
  case $1 in
    readiness-on-api-port)
      sed -i '/readinessProbe:/{n;s/port: admin/port: http/}' "$chart/templates/charge-api-deployment.yaml" ;;
    config-key-refused)
      sed -i 's/^  pending_overdue_after: {{ \$api.pendingOverdueAfter/  pending_overdue: {{ $api.pendingOverdueAfter/' \
        "$chart/templates/_helpers.tpl" ;;
    config-mounted-elsewhere)
      sed -i 's|^  mountPath: {{ include "charge-outbox.configDir" . }}|  mountPath: /etc/charge-outbox-conf|' \
        "$chart/templates/_helpers.tpl" ;;
    liveness-on-a-missing-path)
      sed -i 's|httpGet: {path: /healthz, port: admin}|httpGet: {path: /livez, port: admin}|' \
        "$chart/templates/charge-api-deployment.yaml" ;;
    *) printf 'unknown case %s\n' "$1" >&2; exit 2 ;;
  esac
  [[ $(cat "$chart"/templates/*) != "$before" ]] || { printf 'case %s: the sed changed nothing\n' "$1" >&2; exit 1; }
}

work=$(mktemp -d /tmp/charge-outbox-broken.XXXXXX)
trap 'rm -rf "$work"' EXIT
results=()
for case_name in "${cases[@]}"; do
  copy=$work/$case_name
  mkdir -p "$copy"
  # The repository as it is (uncommitted changes too), without its build trees.
  tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -C "$copy" -xf -
  break_chart "$case_name" "$copy"
  printf '== %s: the kwok install test\n' "$case_name" >&2
  kwok=passed
  "$copy/tests/kube/install_test.sh" >"$work/$case_name-kwok.log" 2>&1 || kwok="failed: $(grep -m1 '^FAIL' "$work/$case_name-kwok.log" || tail -n 1 "$work/$case_name-kwok.log")"
  printf '== %s: the real-node release test\n' "$case_name" >&2
  real=passed
  RELEASE_TEST_CHART=$copy/helm/charge-outbox RELEASE_TEST_INSTALL_TIMEOUT=120s \
    "$root/tests/kube/release_real_node_test.sh" "$acquirer_sim" >"$work/$case_name-real.log" 2>&1 ||
    real="failed: $(grep -m1 -A3 '^FAIL' "$work/$case_name-real.log" | tr '\n' ' ' | cut -c1-400)"
  results+=("$case_name: kwok $kwok; real node $real")
  printf '%s\n' "${results[-1]}" >&2
done
printf '\n' >&2
status=0
for line in "${results[@]}"; do
  printf 'RESULT %s\n' "$line"
  [[ $line == *"kwok passed; real node failed"* ]] || status=1
done
exit "$status"

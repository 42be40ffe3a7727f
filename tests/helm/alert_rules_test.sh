#!/usr/bin/env bash
# The chart's alerts evaluated by Prometheus's own rule engine: `promtool check rules` on the rules the chart
# renders (values-everything.yaml, release "rel", namespace "pay"), then `promtool test rules` with
# alert_rules_test.yaml, where each alert has a series that fires it and one that does not. promtool comes
# from the Go module proxy, built once into the project's cache by tests/run (PROMTOOL_BIN).
set -euo pipefail
helm=${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}
promtool=${PROMTOOL_BIN:?PROMTOOL_BIN is not set: tests/run builds promtool and exports it}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$helm" template rel "$root/helm/charge-outbox" -f "$here/values-everything.yaml" --namespace pay >"$work/all.yaml"
# The PrometheusRule's spec is a Prometheus rule file (groups: ...); Debian's python3-yaml cuts it out.
/usr/bin/python3 - "$work/all.yaml" "$work/rules.yaml" <<'PY'
import sys, yaml
rules = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "PrometheusRule"]
if len(rules) != 1:
    sys.exit(f"expected one PrometheusRule, the chart rendered {len(rules)}")
yaml.safe_dump({"groups": rules[0]["spec"]["groups"]}, open(sys.argv[2], "w"), sort_keys=False)
PY
cp "$here/alert_rules_test.yaml" "$work/"
alerts=$(grep -c '^ *- alert: ' "$work/rules.yaml")
tested=$(grep -oE 'alertname: [A-Za-z]+' "$here/alert_rules_test.yaml" | sort -u | wc -l)
[[ $alerts == "$tested" ]] || { echo "FAIL: the chart has $alerts alerts, alert_rules_test.yaml tests $tested" >&2; exit 1; }
(cd "$work" && "$promtool" check rules rules.yaml && "$promtool" test rules alert_rules_test.yaml)

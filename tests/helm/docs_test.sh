#!/usr/bin/env bash
# helm/README.md is what helm-docs generates from helm/README.md.gotmpl and the `# --` comments of
# values.yaml (tests/run builds helm-docs from the Go module proxy and exports HELM_DOCS_BIN): regenerated
# into a temporary copy of the chart and compared, so a value added, renamed or re-described without
# regenerating the README fails here with the diff. Every value has a description.
set -euo pipefail
helm_docs=${HELM_DOCS_BIN:?HELM_DOCS_BIN is not set: tests/run builds helm-docs (deploy/local/lib/helm.sh: helm_docs_fetch) and exports it}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
helm_dir=$(cd "$here/../../helm" && pwd)
regenerate="$(basename "$helm_docs") --chart-search-root helm/charge-outbox --template-files ../README.md.gotmpl --output-file ../README.md"
failures=0
fail() { printf 'FAIL: %s\n' "$*" >&2; failures=$((failures + 1)); }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$helm_dir/charge-outbox" "$work/charge-outbox"
cp "$helm_dir/README.md.gotmpl" "$work/README.md.gotmpl"
"$helm_docs" --log-level warning --chart-search-root "$work/charge-outbox" --template-files ../README.md.gotmpl \
  --output-file ../README.md >"$work/helm-docs.log" 2>&1 ||
  { cat "$work/helm-docs.log" >&2; fail "helm-docs failed"; exit 1; }
[[ -s $work/README.md ]] || { fail "helm-docs wrote no README.md"; exit 1; }

if ! diff -u --label helm/README.md --label "helm/README.md as generated" "$helm_dir/README.md" "$work/README.md" >"$work/diff"; then
  cat "$work/diff" >&2
  fail "helm/README.md is stale: regenerate it from the repository's root with: $regenerate"
fi

# A values row whose description column is empty: a value with no `# --` comment above it.
undocumented=$(grep -E '^\| [^ ]+ \| [a-z]+ \| .* \|  \|$' "$work/README.md" | awk -F' \\| ' '{ sub(/^\| /, "", $1); print $1 }' || true)
[[ -z $undocumented ]] ||
  fail "values without a description (a '# -- ...' comment above each in values.yaml): $(paste -sd' ' <<<"$undocumented")"
rows=$(grep -cE '^\| [a-zA-Z]+\.[^ ]* \| ' "$work/README.md" || true)
((rows > 100)) || fail "the values table has $rows rows: helm-docs found no values, or the template lost the table"

((failures == 0)) || { printf '%d check(s) failed\n' "$failures" >&2; exit 1; }
echo "helm/README.md is up to date: $rows values, each described"

#!/usr/bin/env bash
# docs/events/asyncapi.yaml through the real AsyncAPI parser (@asyncapi/parser; tests/run installs it into
# the project's cache and exports ASYNCAPI_PARSER_DIR) and the contract checks of asyncapi_check.cjs; then
# three broken copies, each of which must fail: one the parser refuses (not AsyncAPI 3.0), one it accepts
# but whose captured message carries another event's schema, one whose x-delivery.gaps says something
# docs/events.md does not.
set -euo pipefail
parser=${ASYNCAPI_PARSER_DIR:?ASYNCAPI_PARSER_DIR is not set: tests/run installs the AsyncAPI parser and exports it}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# The copies sit at the same depth as the original, so that their relative $refs reach schemas/events.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/docs/events"
ln -s "$root/schemas" "$work/schemas"
sed 's/^    action: send$/    action: publish/' "$root/docs/events/asyncapi.yaml" >"$work/docs/events/not-asyncapi.yaml"
sed "0,/payments\.charge\.captured\.v1\.json'/s//payments.charge.failed.v1.json'/" "$root/docs/events/asyncapi.yaml" \
  >"$work/docs/events/wrong-payload.yaml"
sed '/^      gaps: >-$/,/missing event\.$/s/do not wait for the missing event/wait for the missing event/' \
  "$root/docs/events/asyncapi.yaml" >"$work/docs/events/other-gaps.yaml"
cmp -s "$root/docs/events/asyncapi.yaml" "$work/docs/events/other-gaps.yaml" && {
  echo "the other-gaps copy is unchanged: the sed no longer finds x-delivery.gaps" >&2
  exit 1
}
node "$here/asyncapi_check.cjs" "$parser" "$root/schemas/events" "$root/docs/events.md" \
  "$root/docs/events/asyncapi.yaml" \
  --broken "$work/docs/events/not-asyncapi.yaml" "$work/docs/events/wrong-payload.yaml" \
  "$work/docs/events/other-gaps.yaml"

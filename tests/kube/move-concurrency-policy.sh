#!/usr/bin/env bash
# A helm post-renderer for the install test: moves the CronJob's concurrencyPolicy from its spec into its
# jobTemplate's spec, the kind of slip a template makes when a knob is rendered under the wrong key.
# Exits non-zero when there was nothing to move, so that the test cannot pass for the wrong reason.
set -euo pipefail
awk '
  /^  concurrencyPolicy:/ { misplaced = $0; sub(/^  /, "      ", misplaced); next }
  { print }
  previous ~ /^  jobTemplate:$/ && /^    spec:$/ && misplaced != "" { print misplaced; moved = 1 }
  { previous = $0 }
  END { exit moved ? 0 : 1 }
'

#!/usr/bin/python3
"""The metric names as a contract (docs/metrics.md): every metric the code registers is documented with
its type, every documented one is registered, each follows the naming rule (one prefix per component,
counters and only counters end in `_total`), every label key the code uses is in the documented label
vocabulary, and no name listed as renamed is still read anywhere (alerts, dashboards, bench scripts,
tests, docs). ctest `MetricNames`; needs nothing but the source tree.
"""
import pathlib
import re
import subprocess
import sys
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
import markdown_tables  # noqa: E402
from markdown_tables import rows  # noqa: E402

DOC = ROOT / "docs" / "metrics.md"

# The component of each source tree, and its prefix (docs/metrics.md, "The naming rule").
PREFIXES = {
    "services/charge-api/": "charge_api_",
    "services/outbox-relay/": "outbox_",
    "services/reconciler/": "reconciler_",
    "common/src/inbox/": "inbox_",
    "services/settlement-projection/": "settlement_projection_",
}
# Names the product contract fixes, whatever the rule says.
CONTRACT = {"charges_pending_overdue": "services/charge-api/", "outbox_lag_seconds": "services/outbox-relay/"}

BUILD = re.compile(r"Build(Counter|Gauge|Histogram|Summary|Info)\(\)\s*\.Name\(\"([^\"]+)\"\)")
# The reconciler's probe registers its unlabelled gauges through a local helper, gauge("name", ...).
HELPER_GAUGE = re.compile(r"\bgauge\(\s*\"([^\"]+)\"")
# The label pairs of a series: .Add({{"key", value}, {"key", value}}).
SERIES = re.compile(r"\.Add\(\s*\{(\{.*?\})\}", re.S)
LABEL_KEY = re.compile(r"\{\"([a-z_]+)\",\s")


def metric_sources():
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
                          "common/src", "services"], check=True, capture_output=True, text=True).stdout
    for rel in out.split():
        path = ROOT / rel
        if rel.endswith(".cpp") and path.exists() and "prometheus::Build" in path.read_text():
            yield rel, path.read_text()


def registered():
    """{name: (type, file)} for every metric registered in common/src and services/."""
    found = {}
    for rel, text in metric_sources():
        for kind, name in BUILD.findall(text):
            found[name] = (kind.lower(), rel)
        for name in HELPER_GAUGE.findall(text):
            found[name] = ("gauge", rel)
    return found


def doc_sections():
    return markdown_tables.sections(DOC)


def documented():
    """{name: type} of every metric in a component table (a row: name, type, labels, meaning)."""
    found = {}
    for heading, text in doc_sections().items():
        if heading.startswith("Renamed") or heading.startswith("The naming rule"):
            continue
        for cells in rows(text):
            m = re.fullmatch(r"`([a-z_]+)`", cells[0])
            if m and len(cells) == 4:
                found[m.group(1)] = cells[1]
    return found


class MetricNames(unittest.TestCase):
    longMessage = False  # the message names the metric; the whole list found adds nothing
    def test_the_scan_finds_every_component(self):
        # A scan that found nothing would pass every other test.
        files = {rel for _, rel in registered().values()}
        for tree in PREFIXES:
            self.assertTrue(any(f.startswith(tree) for f in files), f"no metric registered under {tree}")

    def test_every_registered_metric_is_documented_with_its_type(self):
        docs = documented()
        for name, (kind, rel) in sorted(registered().items()):
            self.assertIn(name, docs, f"{name} ({rel}) is not in docs/metrics.md")
            self.assertEqual(docs[name], kind, f"{name}: docs/metrics.md says {docs[name]}, {rel} registers a {kind}")

    def test_every_documented_metric_is_registered(self):
        code = registered()
        for name in sorted(documented()):
            self.assertIn(name, code, f"docs/metrics.md lists {name}, which no code registers")

    def test_one_prefix_per_component(self):
        for name, (_, rel) in sorted(registered().items()):
            if name in CONTRACT:
                self.assertTrue(rel.startswith(CONTRACT[name]), f"{name} is registered in {rel}")
                continue
            tree = next((t for t in PREFIXES if rel.startswith(t)), None)
            self.assertIsNotNone(tree, f"{name}: {rel} belongs to no component of docs/metrics.md")
            self.assertTrue(name.startswith(PREFIXES[tree]), f"{name} ({rel}) lacks its prefix {PREFIXES[tree]}")
        self.assertFalse([n for n in registered() if n.startswith("outbox_relay_")], "outbox_relay_ beside outbox_")

    def test_counters_and_only_counters_end_in_total(self):
        for name, (kind, rel) in sorted(registered().items()):
            self.assertEqual(kind == "counter", name.endswith("_total"), f"{name} is a {kind} ({rel})")
            self.assertFalse(re.search(r"_(ms|milliseconds|millis|kb|mb)(_|$)", name), f"{name}: not a base unit")
            if kind == "histogram" and "duration" in name:
                self.assertTrue(name.endswith("_duration_seconds"), name)

    def test_every_label_key_is_in_the_vocabulary(self):
        vocabulary = set()
        for cells in rows(doc_sections()["The naming rule"]):
            vocabulary.update(re.findall(r"`([a-z_]+)`", cells[0]))
        self.assertIn("outcome", vocabulary)
        seen = set()
        for rel, text in metric_sources():
            keys = [k for series in SERIES.findall(text) for k in LABEL_KEY.findall(series)]
            seen.update(keys)
            for key in keys:
                self.assertIn(key, vocabulary, f"label {key} ({rel}) is not in docs/metrics.md's label table")
        self.assertTrue({"outcome", "route", "retryability", "kind"} <= seen, f"the scan found only {seen}")

    def test_no_renamed_name_is_read_anywhere(self):
        renamed = []
        for cells in rows(doc_sections()["Renamed (upgrading dashboards and rules)"]):
            before = re.fullmatch(r"`([a-z_]+)(\{[^`]*\})?`", cells[0])
            after = re.fullmatch(r"`([a-z_]+)(\{[^`]*\})?`", cells[1])
            if before and after:
                renamed.append((before.group(1), re.match(r"\{([a-z_]+)=", before.group(2) or "")))
        self.assertIn("outbox_relay_members", [name for name, _ in renamed])
        self.assertIn("class", [label.group(1) for _, label in renamed if label])
        patterns = [(rf"{re.escape(name)}\{{[^}}]*\b{label.group(1)}=" if label else rf"\b{re.escape(name)}\b",
                     f'{name}{{{label.group(1)}=...}}' if label else name) for name, label in renamed]
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True, text=True).stdout
        for rel in out.split():
            path = ROOT / rel
            if rel in ("docs/metrics.md", "tests/metrics/metric_names_test.py") or not path.is_file():
                continue
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            text = text.replace('\\"', '"')
            for pattern, old in patterns:
                self.assertIsNone(re.search(pattern, text), f"{rel} still reads {old}")
            # A renamed label is also read by aggregations and legends: `sum by (class)`, `{{class}}`.
            for name, label in renamed:
                if label and name in text:
                    key = label.group(1)
                    self.assertIsNone(re.search(rf"\b(by|without) \([^)]*\b{key}\b|\{{\{{{key}\}}\}}", text),
                                      f"{rel} reads {name} and still groups or shows by {key}")


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/python3
"""The event schemas (schemas/events) as a contract: well-formed draft 2020-12 schemas that document every
field; published open to additions (a consumer validating with them accepts a later producer's new
fields) while the producer's strict variant (check_events.strict_variant, what the relay's e2e suites and
the chaos run validate with) refuses every undocumented field and what the product never sends;
compatible with their released versions, and a compatibility checker that catches each kind of breaking
change, on the released files and on the published open ones alike.

Runs with Debian's python3-jsonschema (deploy/local/install-deps); ctest `EventSchemas`.
"""
import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

import jsonschema

from check_events import strict_variant

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas" / "events"
CHECKER = ROOT / "schemas" / "check-compatibility"
CHECK_EVENTS = pathlib.Path(__file__).resolve().parent / "check_events.py"
BASE = "https://charge-outbox.example/schemas/events/"
TYPES = ["initiated", "captured", "failed", "canceled", "needs_review"]


def load(name):
    return json.loads((SCHEMAS / f"payments.charge.{name}.v1.json").read_text())


def published(name):
    """The validator a consumer builds from the published file."""
    return jsonschema.Draft202012Validator(load(name), format_checker=jsonschema.FormatChecker())


def validator(name):
    """The producer's strict validator: the closed variant of the same file."""
    return jsonschema.Draft202012Validator(strict_variant(load(name)), format_checker=jsonschema.FormatChecker())


def event(kind, **fields):
    """A payload as charge_event_payload writes it for `kind`."""
    status = {"initiated": "pending"}.get(kind, kind)
    e = {"id": "ch_0123456789abcdef0123456789abcdef", "merchant_id": "6f1c2a4e-0000-4000-8000-000000000001",
         "order_id": "PED-0001", "amount": 25000, "currency": "BRL", "description": "cobrança", "status": status,
         "sequence": 1 if kind == "initiated" else 2, "created_at": "2026-12-02T02:21:00.123Z",
         "updated_at": "2026-12-02T02:21:00.123Z" if kind == "initiated" else "2026-12-02T02:21:01.456Z"}
    e.update({"captured": {"acquirer_capture_id": "cap_1"},
              "failed": {"decline_code": "51"},
              "canceled": {"failure_reason": "deadline_passed_voided", "acquirer_capture_id": "cap_1"},
              "needs_review": {"failure_reason": "window_mismatch"}}.get(kind, {}))
    e.update(fields)
    return {k: v for k, v in e.items() if v is not None}


def walk(schema, path="(root)"):
    """Every subschema with its path."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}/{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key, [])):
            yield from walk(sub, f"{path}/{key}/{i}")


def check(current_dir, released_dir):
    r = subprocess.run([sys.executable, str(CHECKER), "--released", str(released_dir), "--current", str(current_dir)],
                       capture_output=True, text=True, check=False)
    return r.returncode, r.stdout


class WellFormed(unittest.TestCase):
    def test_one_draft_2020_12_schema_per_event_type_named_by_its_id(self):
        files = sorted(p.name for p in SCHEMAS.glob("*.json"))
        self.assertEqual(files, sorted(f"payments.charge.{t}.v1.json" for t in TYPES))
        for t in TYPES:
            s = load(t)
            jsonschema.Draft202012Validator.check_schema(s)
            self.assertEqual(s["$schema"], "https://json-schema.org/draft/2020-12/schema")
            self.assertEqual(s["$id"], f"{BASE}payments.charge.{t}.v1.json")
            self.assertEqual(s["title"], f"payments.charge.{t}.v1")

    def test_every_field_documented_and_every_object_open_to_additions(self):
        """Published open (docs/events.md, "Validating"): every object states `additionalProperties: true`,
        the marker the producer's strict variant closes; an object left unstated or closed would be one
        the strict variant does not see, or one that rejects a later field."""
        for t in TYPES:
            s = load(t)
            self.assertIn("description", s, t)
            objects = 0
            for path, sub in walk(s):
                if path != "(root)" and "/anyOf/" not in path:
                    self.assertTrue(sub.get("description"), f"{t} {path}: no description")
                if sub.get("type") == "object" or "properties" in sub:
                    objects += 1
                    self.assertIs(sub.get("additionalProperties"), True, f"{t} {path}: not open to additions")
            self.assertGreaterEqual(objects, 1, t)

    def test_the_strict_variant_closes_every_object_and_changes_nothing_else(self):
        for t in TYPES:
            s, closed = load(t), strict_variant(load(t))
            for path, sub in walk(closed):
                if sub.get("type") == "object" or "properties" in sub:
                    self.assertIs(sub.get("additionalProperties"), False, f"{t} {path}: left open")
            reopened = json.loads(json.dumps(closed).replace('"additionalProperties": false',
                                                             '"additionalProperties": true'))
            self.assertEqual(reopened, s, t)

    def test_closed_domains_are_closed(self):
        for t in TYPES:
            props = load(t)["properties"]
            self.assertIn("const", props["status"], t)
            if "failure_reason" in props:
                self.assertTrue(props["failure_reason"].get("enum"), f"{t}: failure_reason is open")
            self.assertEqual(props["merchant_id"].get("format"), "uuid")
            self.assertEqual(props["updated_at"].get("format"), "date-time")

    def test_every_failure_reason_the_code_writes_is_in_a_schema(self):
        """The reasons are constants in the code: a new one must reach the schemas (a compatible change)."""
        import re
        listed = set()
        for t in TYPES:
            listed |= set(load(t)["properties"].get("failure_reason", {}).get("enum", []))
        evidence = (ROOT / "common/include/charge_outbox/charges/evidence.hpp").read_text()
        block = evidence[evidence.index("namespace reason {"):evidence.index("}  // namespace reason")]
        constants = set(re.findall(r'constexpr std::string_view k\w+ = "([a-z_]+)";', block))
        self.assertGreaterEqual(len(constants), 9)
        self.assertEqual(constants - listed, set())
        # The reconciler's window comparison flags a charge with "window_" + the discrepancy's name; a
        # capture without a local record has no charge to flag.
        compare = (ROOT / "services/reconciler/src/window_compare.cpp").read_text()
        kinds = set(re.findall(r'case DiscrepancyKind::k\w+: return "([a-z_]+)";', compare))
        self.assertGreaterEqual(len(kinds), 4)
        self.assertEqual({"window_" + k for k in kinds - {"capture_without_local_record"}} - listed, set())
        # A proof that contradicts the winner of a race (evidence.cpp, Contradiction).
        contradictions = {"acquirer_capture_contradicts_failed", "acquirer_capture_contradicts_canceled",
                          "acquirer_decline_contradicts_captured", "acquirer_void_contradicts_captured"}
        self.assertEqual(contradictions - listed, set())

    def test_released_copies_exist_for_every_schema(self):
        for t in TYPES:
            self.assertTrue((SCHEMAS / "released" / f"payments.charge.{t}.v1.json").exists(), t)


class OpenToAdditions(unittest.TestCase):
    """Both directions: what a later producer may add passes a consumer's validator built from the
    published file, and fails the producer's own strict check."""

    ADDITIONS = {
        "a new top-level field": ("captured", lambda e: e.update(refund_id="re_1")),
        "a new field in resolution": ("captured", lambda e: e.update(
            resolution={"decided_by": "operator", "operator": "alice", "ticket": "OPS-1"})),
        "a new field of a failed event": ("failed", lambda e: e.update(network_code="N7")),
    }

    def test_an_extra_field_passes_the_published_schema_and_fails_the_strict_check(self):
        for what, (t, add) in self.ADDITIONS.items():
            payload = event(t)
            add(payload)
            self.assertEqual(list(published(t).iter_errors(payload)), [], f"{what}: refused by the published schema")
            errors = list(validator(t).iter_errors(payload))
            self.assertTrue(errors, f"{what}: accepted by the producer's strict check")
            self.assertTrue(all(e.validator == "additionalProperties" for e in errors), f"{what}: {errors}")

    def test_the_published_schema_still_refuses_what_breaks_a_known_field(self):
        """Open to additions, not to changes: a known field keeps its type, bounds and closed values."""
        for what, (t, fields) in {"another status": ("captured", {"status": "failed"}),
                                  "a zero amount": ("captured", {"amount": 0}),
                                  "a reason outside the list": ("needs_review", {"failure_reason": "looked_odd"}),
                                  "a missing capture id": ("captured", {"acquirer_capture_id": None})}.items():
            self.assertTrue(list(published(t).iter_errors(event(t, **fields))), f"{what} was accepted")

    def run_check_events(self, message, *flags):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
            f.write(json.dumps(message) + "\n")
            f.flush()
            r = subprocess.run([sys.executable, str(CHECK_EVENTS), "--schemas", str(SCHEMAS), *flags, f.name],
                               capture_output=True, text=True, check=False)
        return r.returncode, r.stdout

    def message(self, payload, **extra_headers):
        """A binary-mode message as the relay publishes it."""
        t = {"pending": "initiated"}.get(payload["status"], payload["status"])
        headers = {"ce_specversion": "1.0", "ce_id": "6f1c2a4e-0000-4000-8000-0000000000aa",
                   "ce_source": "/charge-outbox/charge-api", "ce_type": f"payments.charge.{t}.v1",
                   "ce_time": payload["updated_at"], "ce_subject": payload["id"],
                   "ce_dataschema": f"{BASE}payments.charge.{t}.v1.json", "content-type": "application/json"}
        headers.update(extra_headers)
        return {"key": payload["id"], "value": json.dumps(payload), "headers": headers}

    def test_check_events_is_the_strict_check_and_reads_as_a_consumer_with_published(self):
        self.assertEqual(self.run_check_events(self.message(event("captured"))), (0, ""))
        extra = event("captured", refund_id="re_1")
        code, out = self.run_check_events(self.message(extra))
        self.assertEqual(code, 1)
        self.assertIn("'refund_id' was unexpected", out)
        self.assertEqual(self.run_check_events(self.message(extra), "--published"), (0, ""))
        code, out = self.run_check_events(self.message(event("captured"), ce_partitionkey="p"))
        self.assertEqual(code, 1)
        self.assertIn("header 'ce_partitionkey' is not in the contract", out)
        self.assertIn("attribute 'partitionkey' is not in the contract", out)
        self.assertEqual(self.run_check_events(self.message(event("captured"), ce_partitionkey="p"), "--published"),
                         (0, ""))


class Strict(unittest.TestCase):
    def test_what_the_product_writes_is_valid(self):
        for t in TYPES:
            errors = list(validator(t).iter_errors(event(t)))
            self.assertEqual(errors, [], t)
        self.assertEqual(list(validator("failed").iter_errors(
            event("failed", decline_code=None, failure_reason="acquirer_unreachable"))), [])
        self.assertEqual(list(validator("needs_review").iter_errors(
            event("needs_review", acquirer_capture_id="cap_9", decline_code="05"))), [])

    def test_what_the_product_never_writes_is_refused(self):
        refused = {
            "an unknown field": ("captured", {"card_number": "4111111111111111"}),
            "another status": ("captured", {"status": "failed"}),
            "a reason outside the list": ("needs_review", {"failure_reason": "looked_odd"}),
            "a failed charge with neither a decline nor a reason": ("failed", {"decline_code": None}),
            "a captured charge without its capture id": ("captured", {"acquirer_capture_id": None}),
            "a time without milliseconds": ("initiated", {"updated_at": "2026-12-02T02:21:00Z"}),
            "a time not in UTC": ("initiated", {"created_at": "2026-12-02T02:21:00.123+01:00"}),
            "a zero amount": ("captured", {"amount": 0}),
            "an amount with a fraction": ("captured", {"amount": 10.5}),
            "a lowercase currency": ("captured", {"currency": "brl"}),
            "a malformed charge id": ("captured", {"id": "ch_XYZ"}),
            "a merchant id that is no UUID": ("captured", {"merchant_id": "merchant-1"}),
            "a null description": ("captured", {}),
            "an initiated event that is not the first": ("initiated", {"sequence": 2}),
            "a sequence of zero": ("captured", {"sequence": 0}),
        }
        for what, (t, fields) in refused.items():
            payload = event(t, **fields)
            if what == "a null description":
                payload["description"] = None
            self.assertTrue(list(validator(t).iter_errors(payload)), f"{what} was accepted")


class Compatibility(unittest.TestCase):
    def test_the_current_schemas_are_compatible_with_the_released_ones(self):
        code, out = check(SCHEMAS, SCHEMAS / "released")
        self.assertEqual((code, out), (0, ""))

    # Each change is tried on top of the released files (closed, as v1 shipped) and on top of the
    # published ones (open to additions): an open schema still accepts a removed field's value as an
    # addition, so the checker must compare the declared fields, not only what validates.
    BASELINES = {"released": SCHEMAS / "released", "published": SCHEMAS}

    def mutated(self, name, change, baseline="released"):
        """Runs the checker on a baseline's schemas against a copy of them with `change` applied to one."""
        base = self.BASELINES[baseline]
        with tempfile.TemporaryDirectory() as tmp:
            current = pathlib.Path(tmp)
            for p in base.glob("*.json"):
                (current / p.name).write_text(p.read_text())
            if name is not None:
                target = current / f"payments.charge.{name}.v1.json"
                s = json.loads(target.read_text())
                if change(s) == "delete":
                    target.unlink()
                else:
                    target.write_text(json.dumps(s))
            return check(current, base)

    def test_each_breaking_change_fails_the_check(self):
        def remove_field(s):
            del s["properties"]["description"]

        def narrow_type(s):
            s["properties"]["amount"]["type"] = "string"

        def remove_enum_value(s):
            s["properties"]["failure_reason"]["enum"].remove("not_captured")

        def new_required(s):
            s["required"].append("description")

        def tighten_bound(s):
            s["properties"]["order_id"]["maxLength"] = 64

        def change_id(s):
            s["$id"] = s["$id"].replace("v1", "v2")

        breaking = {
            "field 'description' removed": ("captured", remove_field),
            "type ['integer'] no longer accepted": ("captured", narrow_type),
            "enum value(s) ['not_captured'] removed": ("failed", remove_enum_value),
            "'description' is now required": ("canceled", new_required),
            "maxLength lowered to 64": ("initiated", tighten_bound),
            "$id changed": ("needs_review", change_id),
            "event type removed": ("canceled", lambda s: "delete"),
        }
        def change_nested_field(s):
            s["properties"]["resolution"]["properties"]["operator"]["maxLength"] = 20

        def remove_nested_field(s):
            del s["properties"]["resolution"]["properties"]["operator"]

        # `resolution` came after v1 was released: its changes are tried on the published files only.
        nested = {"maxLength lowered to 20": ("failed", change_nested_field),
                  "field 'operator' removed": ("canceled", remove_nested_field)}
        for baseline in self.BASELINES:
            for what, (name, change) in (breaking | nested if baseline == "published" else breaking).items():
                code, out = self.mutated(name, change, baseline)
                self.assertEqual(code, 1, f"{what} ({baseline}): not reported")
                self.assertIn(what, out, baseline)

    def test_closing_a_published_schema_again_fails_the_check(self):
        def close(s):
            s["additionalProperties"] = False

        def close_resolution(s):
            s["properties"]["resolution"]["additionalProperties"] = False

        for name, change in (("captured", close), ("captured", close_resolution)):
            code, out = self.mutated(name, change, "published")
            self.assertEqual(code, 1, name)
            self.assertIn("additionalProperties closed", out)

    def test_compatible_changes_pass(self):
        def add_optional_field(s):
            s["properties"]["refund_id"] = {"type": "string", "description": "a new optional field"}

        def add_enum_value(s):
            s["properties"]["failure_reason"]["enum"].append("acquirer_expired")

        def loosen_and_document(s):
            s["properties"]["order_id"]["maxLength"] = 512
            s["properties"]["amount"]["description"] = "reworded"

        for baseline in self.BASELINES:
            for name, change in (("captured", add_optional_field), ("needs_review", add_enum_value),
                                 ("initiated", loosen_and_document), (None, None)):
                code, out = self.mutated(name, change, baseline)
                self.assertEqual((code, out), (0, ""), f"{name} ({baseline})")


if __name__ == "__main__":
    unittest.main(verbosity=2)

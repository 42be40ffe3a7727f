#!/usr/bin/python3
"""The event schemas (schemas/events) as a contract: well-formed draft 2020-12 schemas that document every
field and state additionalProperties, strict enough to refuse what the product never sends, compatible
with their released versions, and a compatibility checker that catches each kind of breaking change.

Runs with Debian's python3-jsonschema (deploy/local/install-deps); ctest `EventSchemas`.
"""
import copy
import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas" / "events"
CHECKER = ROOT / "schemas" / "check-compatibility"
BASE = "https://charge-outbox.example/schemas/events/"
TYPES = ["initiated", "captured", "failed", "canceled", "needs_review"]


def load(name):
    return json.loads((SCHEMAS / f"payments.charge.{name}.v1.json").read_text())


def validator(name):
    return jsonschema.Draft202012Validator(load(name), format_checker=jsonschema.FormatChecker())


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

    def test_every_field_documented_and_every_object_closed_or_open_on_purpose(self):
        for t in TYPES:
            s = load(t)
            self.assertIn("description", s, t)
            self.assertIs(s.get("additionalProperties"), False, f"{t}: additionalProperties not stated")
            for path, sub in walk(s):
                if path != "(root)" and "/anyOf/" not in path:
                    self.assertTrue(sub.get("description"), f"{t} {path}: no description")
                if sub.get("type") == "object" or "properties" in sub:
                    self.assertIn("additionalProperties", sub, f"{t} {path}: additionalProperties not stated")

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

    def mutated(self, name, change):
        """Runs the checker on the released schemas against a copy of them with `change` applied to one."""
        with tempfile.TemporaryDirectory() as tmp:
            current = pathlib.Path(tmp)
            for p in (SCHEMAS / "released").glob("*.json"):
                (current / p.name).write_text(p.read_text())
            if name is not None:
                target = current / f"payments.charge.{name}.v1.json"
                s = json.loads(target.read_text())
                if change(s) == "delete":
                    target.unlink()
                else:
                    target.write_text(json.dumps(s))
            return check(current, SCHEMAS / "released")

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
        for what, (name, change) in breaking.items():
            code, out = self.mutated(name, change)
            self.assertEqual(code, 1, f"{what}: not reported")
            self.assertIn(what, out)

    def test_compatible_changes_pass(self):
        def add_optional_field(s):
            s["properties"]["refund_id"] = {"type": "string", "description": "a new optional field"}

        def add_enum_value(s):
            s["properties"]["failure_reason"]["enum"].append("acquirer_expired")

        def loosen_and_document(s):
            s["properties"]["order_id"]["maxLength"] = 512
            s["properties"]["amount"]["description"] = "reworded"

        for name, change in (("captured", add_optional_field), ("needs_review", add_enum_value),
                             ("initiated", loosen_and_document), (None, None)):
            code, out = self.mutated(name, change)
            self.assertEqual((code, out), (0, ""), name)


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/python3
"""Checks charge events read back from Kafka against the published contract (docs/events.md).

Input: a file of JSON lines, one consumed Kafka message each: {"key": ..., "value": ..., "headers": {...}}
with the value as text. Both CloudEvents modes the relay writes are understood: binary (attributes in
ce_* headers, the payload as the value) and structured (content-type application/cloudevents+json, the
attributes and the payload as `data` in the value).

Each payload is validated against the JSON Schema its ce_type names in schemas/events by a real
validator: Debian's python3-jsonschema, draft 2020-12 (deploy/local/install-deps installs it; run with
/usr/bin/python3, the interpreter that package belongs to). Around the schema, the attributes the
contract fixes: ce_dataschema is the schema's $id, ce_subject and the key are the payload's id, ce_time
is the payload's updated_at (one clock), ce_id is a UUID, and traceparent, when present, is W3C's.

This is the producer's check, so it is strict: the published schemas are open to additions
(`additionalProperties: true`, so that a consumer validating with them accepts a later producer's new
fields), and this check validates with their closed variant (`strict_variant`: every object closed), so
a field, header or CloudEvents attribute that no schema or docs/events.md names is a violation: the
product never emits an undocumented field. `--published` validates as a consumer does, with the files as
they are.

Prints one line per violation and exits 1 if there is any; exits 2 when it cannot run at all.
"""
import argparse
import json
import pathlib
import re
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is missing: run deploy/local/install-deps (as root)", file=sys.stderr)
    sys.exit(2)

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$")
TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
# The attributes the contract names (docs/events.md, "The headers"; docs/events/asyncapi.yaml), as this
# check sees them: without the ce_ prefix in binary mode, as the envelope's keys (without data) in
# structured mode.
BINARY_ATTRIBUTES = {"specversion", "id", "source", "type", "time", "subject", "dataschema", "traceparent"}
STRUCTURED_ATTRIBUTES = BINARY_ATTRIBUTES | {"datacontenttype"}
BINARY_HEADERS = {"ce_" + a for a in BINARY_ATTRIBUTES - {"traceparent"}} | {"content-type", "traceparent"}
STRUCTURED_HEADERS = {"content-type", "traceparent"}


def strict_variant(schema):
    """The producer's closed variant of a published schema: the same schema with every object that the
    published file leaves open to additions (`additionalProperties: true`) closed. Derived, never written
    down, so the two cannot drift apart."""
    if isinstance(schema, list):
        return [strict_variant(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {k: strict_variant(v) for k, v in schema.items()}
    if closed.get("additionalProperties") is True:
        closed["additionalProperties"] = False
    return closed


def load_schemas(directory, strict=True):
    """Every schemas/events/<type>.json, by event type (the file name without .json): its strict variant,
    or the file as published."""
    validators = {}
    for path in sorted(pathlib.Path(directory).glob("*.json")):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        if strict:
            schema = strict_variant(schema)
        validators[path.stem] = (
            schema["$id"],
            jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()),
        )
    if not validators:
        print(f"no schemas in {directory}", file=sys.stderr)
        sys.exit(2)
    return validators


def attributes_of(message):
    """(attributes without the ce_ prefix, payload text or object, mode) of one message."""
    headers = message.get("headers", {})
    if headers.get("content-type") == "application/cloudevents+json":
        envelope = json.loads(message["value"])
        if not isinstance(envelope, dict):
            raise ValueError("structured-mode value is not a JSON object")
        attributes = {k: v for k, v in envelope.items() if k not in ("data", "data_base64")}
        if "data" not in envelope:
            raise ValueError("structured-mode value has no data")
        return attributes, envelope["data"], "structured"
    attributes = {k[3:]: v for k, v in headers.items() if k.startswith("ce_")}
    if headers.get("content-type") != "application/json":
        raise ValueError(f"content-type {headers.get('content-type')!r}, expected application/json")
    if "traceparent" in headers:
        attributes["traceparent"] = headers["traceparent"]
    return attributes, json.loads(message["value"]), "binary"


def undocumented(message, attributes, mode):
    """The headers and attributes of a message that the contract does not name."""
    headers = set(message.get("headers", {}))
    named_headers, named_attributes = ((BINARY_HEADERS, BINARY_ATTRIBUTES) if mode == "binary"
                                       else (STRUCTURED_HEADERS, STRUCTURED_ATTRIBUTES))
    return sorted(headers - named_headers), sorted(set(attributes) - named_attributes)


def violations_of(message, validators, sources, strict=True):
    try:
        attributes, data, mode = attributes_of(message)
    except (ValueError, KeyError) as e:
        yield f"unreadable message (key {message.get('key')!r}): {e}"
        return
    where = attributes.get("id", f"key {message.get('key')!r}")
    if strict:
        headers, names = undocumented(message, attributes, mode)
        for h in headers:
            yield f"{where}: header {h!r} is not in the contract (docs/events.md)"
        for a in names:
            yield f"{where}: attribute {a!r} is not in the contract (docs/events.md)"
    if attributes.get("specversion") != "1.0":
        yield f"{where}: specversion {attributes.get('specversion')!r}, expected '1.0'"
    if not UUID.match(str(attributes.get("id", ""))):
        yield f"{where}: id is not a lowercase UUID"
    source = attributes.get("source", "")
    if not isinstance(source, str) or not source.startswith("/"):
        yield f"{where}: source {source!r} is not an absolute path reference"
    elif sources and source not in sources:
        yield f"{where}: source {source!r} is none of {sorted(sources)}"
    if not TIME.match(str(attributes.get("time", ""))):
        yield f"{where}: time {attributes.get('time')!r} is not RFC 3339 UTC with milliseconds"
    if "traceparent" in attributes and not TRACEPARENT.match(str(attributes["traceparent"])):
        yield f"{where}: traceparent {attributes['traceparent']!r} is not W3C trace context"
    if mode == "structured" and attributes.get("datacontenttype") != "application/json":
        yield f"{where}: datacontenttype {attributes.get('datacontenttype')!r}, expected application/json"
    event_type = attributes.get("type")
    if event_type not in validators:
        yield f"{where}: type {event_type!r} has no schema in schemas/events"
        return
    schema_id, validator = validators[event_type]
    if attributes.get("dataschema") != schema_id:
        yield f"{where}: dataschema {attributes.get('dataschema')!r}, expected {schema_id!r}"
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        path = "/".join(str(p) for p in error.absolute_path) or "(payload)"
        yield f"{where}: {event_type} payload {path}: {error.message}"
    if not isinstance(data, dict):
        return
    if not (attributes.get("subject") == data.get("id") == message.get("key")):
        yield (f"{where}: subject {attributes.get('subject')!r}, key {message.get('key')!r} and payload id "
               f"{data.get('id')!r} differ")
    if attributes.get("time") != data.get("updated_at"):
        yield f"{where}: time {attributes.get('time')!r} is not the payload's updated_at {data.get('updated_at')!r}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", required=True, help="the schemas/events directory")
    parser.add_argument("--source", action="append", default=[],
                        help="a source the events may carry (repeatable; default: any absolute path)")
    parser.add_argument("--published", action="store_true",
                        help="validate with the schemas as published (open to additions), as a consumer does, "
                             "instead of the producer's strict variant")
    parser.add_argument("messages", help="JSON lines: {key, value, headers}")
    args = parser.parse_args()
    validators = load_schemas(args.schemas, strict=not args.published)
    failures = 0
    count = 0
    with open(args.messages, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            count += 1
            for violation in violations_of(json.loads(line), validators, set(args.source), not args.published):
                failures += 1
                print(violation)
    variant = "published" if args.published else "strict"
    print(f"{count} events checked against {len(validators)} schemas ({variant}), {failures} violations",
          file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

"""values.schema.json describes every value, and holds every value of values.yaml.

- Every property, at every depth (its shared definitions included), has a non-empty `description`: the
  schema is what editors and `helm show values`' readers see, so an undescribed key is undocumented.
- Every leaf of values.yaml (a scalar, an empty map or list) is reached through the schema's
  properties, following `$ref`, `items` and the maps that take any key (`additionalProperties` with a
  schema); a leaf under an object the schema leaves open (a Kubernetes object passed through) counts as
  reached. A value the schema does not know would be refused by helm (additionalProperties: false), or,
  under an open map, accepted unchecked and undocumented.

Run by ctest HelmChart.ValuesSchema with Debian's python3-yaml: /usr/bin/python3 values_schema_test.py
"""
import json
import pathlib
import sys

import yaml

CHART = pathlib.Path(__file__).resolve().parents[2] / "helm" / "charge-outbox"


def undescribed_properties(node, path):
    """Paths of the properties under `node` (any depth) with no description."""
    found = []
    if isinstance(node, dict):
        for name, child in node.get("properties", {}).items():
            where = f"{path}.properties.{name}" if path else f"properties.{name}"
            description = child.get("description") if isinstance(child, dict) else None
            if not (isinstance(description, str) and description.strip()):
                found.append(where)
        for key, child in node.items():
            if key == "properties":
                for name, prop in child.items():
                    found += undescribed_properties(prop, f"{path}.properties.{name}" if path else f"properties.{name}")
            elif isinstance(child, (dict, list)):
                found += undescribed_properties(child, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += undescribed_properties(child, f"{path}[{i}]")
    return found


def resolve(schema, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"unsupported $ref {ref}")
        target = schema
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node


def leaves(value, path):
    """(path, [keys]) of every leaf of a values tree: scalars, empty maps and lists."""
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from leaves(child, path + [key])
    elif isinstance(value, list) and value:
        for child in value:
            yield from leaves(child, path + [[]])
    else:
        yield path


def reaches(schema, keys):
    """None if the schema reaches the leaf at keys, else the first key it does not know."""
    node = resolve(schema, schema)
    for key in keys:
        if key == []:  # a list item
            items = node.get("items")
            if not isinstance(items, dict):
                return "[] (no items schema)"
            node = resolve(schema, items)
            continue
        properties = node.get("properties", {})
        if key in properties:
            node = resolve(schema, properties[key])
        elif isinstance(node.get("additionalProperties"), dict):
            node = resolve(schema, node["additionalProperties"])
        elif node.get("type") == "object" and not properties and node.get("additionalProperties") is not False:
            return None  # an open object: whatever is under it is passed through
        else:
            return key
    return None


def main():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    failures = []

    missing = undescribed_properties(schema, "")
    failures += [f"values.schema.json: {path} has no description" for path in missing]

    leaf_paths = list(leaves(values, []))
    for keys in leaf_paths:
        unknown = reaches(schema, keys)
        if unknown is not None:
            shown = ".".join("[]" if k == [] else k for k in keys)
            failures.append(f"values.yaml: {shown} is not in values.schema.json (no schema for '{unknown}')")

    described = sum(1 for _ in _all_properties(schema))
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"values.schema.json: {described} properties, each described; all {len(leaf_paths)} leaves of values.yaml in it")
    return 0


def _all_properties(node):
    if isinstance(node, dict):
        for key, child in node.items():
            if key == "properties":
                for prop in child.values():
                    yield prop
                    yield from _all_properties(prop)
            else:
                yield from _all_properties(child)
    elif isinstance(node, list):
        for child in node:
            yield from _all_properties(child)


if __name__ == "__main__":
    sys.exit(main())

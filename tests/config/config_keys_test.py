#!/usr/bin/python3
"""The configuration keys as a contract (docs/configuration.md): every key a daemon reads is in the key
table, under its environment variable and with every daemon that reads it; every key in the table is read
by the daemons it names; and every key refused by ConfigReader::Renamed is in the renamed table with its
new name, and nothing else is. ctest `ConfigKeys`; needs nothing but the source tree.

Keys are found in the source of common/src and services/*/src, in the files that take a
config::ConfigReader&, in the forms the loaders use:
  - a call whose first argument is a dotted key: reader.Duration("a.b", ...), whole_seconds("a.b", ...)
  - a table row whose first member is one: {"kafka.sasl_mechanism", "sasl.mechanism"}
  - a loop over names: for (const char* name : {"x", "y"}) ... std::string("faults.") + name
  - retry::LoadBackoffOptions(reader, "<scope>", ...): <scope>.backoff.base and .max (and .budget, for the
    scopes whose defaults carry a budget: BUDGETED below)
A daemon reads the keys of its own files and of the common loaders they call (a function of common/src
taking a config::ConfigReader&), transitively.
"""
import pathlib
import re
import sys
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
import markdown_tables  # noqa: E402
from markdown_tables import rows  # noqa: E402

DOC = ROOT / "docs" / "configuration.md"

KEY = r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+"
READER_ARG = re.compile(r"config::ConfigReader&\s*\w+")
READS = r"String|Integer|Number|Boolean|Duration|Choice|Secret|OptionalSecret"
# A read with a dotted key first: a ConfigReader method, or a helper of the file that passes its `key` to
# one (a lambda or function taking `key`). ConfigError names a key, it does not read one.
CALL = re.compile(r"(?:\.(?:" + READS + r")|\b(\w+))\(\s*\"(" + KEY + r")\"")
HELPER = re.compile(r"(?:auto (\w+) = \[[^\]]*\]|\b(\w+))\((?:const char\*|const std::string&|std::string_view) key\b")
# A table row with a dotted key first, in a file that reads a table's keys: reader.String(p.key, ...).
TABLE_ROW = re.compile(r"\{\s*\"(" + KEY + r")\",\s*\"")
TABLE_READ = re.compile(r"\.(?:" + READS + r")\(\s*\w+\.key\b")
LOOP = re.compile(r"for \(const char\* (\w+) : \{([^}]*)\}\)")
RENAMED = re.compile(r"\.Renamed\(\s*\"(" + KEY + r")\",\s*\"(" + KEY + r")\"\)")
RENAMED_LOOP = re.compile(r"\.Renamed\(\s*std::string\(\"([a-z_.]+\.)\"\)\s*\+\s*(\w+),\s*std::string\(\"([a-z_.]+\.)\"\)\s*\+\s*\2\)")
BACKOFF = re.compile(r"LoadBackoffOptions\(\s*\w+,\s*\"(" + KEY + r"|[a-z_]+)\"")
LOADER_DEF = re.compile(r"^[\w:<>]+\s+(\w+)\(config::ConfigReader&\s*\w+", re.M)
# The backoff scopes whose defaults carry a budget (retry::BackoffOptions::budget), so that
# LoadBackoffOptions also reads <scope>.backoff.budget: acquirer::RetryPolicyOptions.
BUDGETED = {"acquirer.retry"}


def daemons():
    return sorted(p.name for p in (ROOT / "services").iterdir() if (p / "main.cpp").exists())


def loader_files():
    """Every source file of common/src and services/*/src that takes a ConfigReader (config.cpp aside)."""
    for path in sorted((ROOT / "common" / "src").rglob("*.cpp")) + sorted((ROOT / "services").glob("*/src/*.cpp")):
        if path.name != "config.cpp" and READER_ARG.search(path.read_text()):
            yield path


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def keys_in(text):
    """(read keys, renamed (old, new) pairs, backoff scopes) spelled in one file."""
    read, renamed, scopes = set(), set(), set()
    for old, new in RENAMED.findall(text):
        renamed.add((old, new))
    for old_prefix, var, new_prefix in RENAMED_LOOP.findall(text):
        for loop_var, names in LOOP.findall(text):
            if loop_var == var:
                for name in re.findall(r"\"([a-z0-9_]+)\"", names):
                    renamed.add((old_prefix + name, new_prefix + name))
    helpers = {m.group(1) or m.group(2) for m in HELPER.finditer(text)
               if re.search(r"\.(?:" + READS + r")\(key\b", text[m.end():m.end() + 300])}
    for function, key in CALL.findall(text):
        if not function or function in helpers:
            read.add(key)
    if TABLE_READ.search(text):
        read.update(TABLE_ROW.findall(text))
    for match in LOOP.finditer(text):
        var, names = match.groups()
        body = text[match.end():match.end() + 400]
        for prefix in re.findall(r"std::string\(\"([a-z_.]+\.)\"\)\s*\+\s*" + var + r"\b", body):
            if f'Renamed(std::string("{prefix}")' in body:
                continue
            read.update(prefix + n for n in re.findall(r"\"([a-z0-9_]+)\"", names))
    for scope in BACKOFF.findall(text):
        scopes.add(scope)
        read.update({f"{scope}.backoff.base", f"{scope}.backoff.max"})
        if scope in BUDGETED:
            read.add(f"{scope}.backoff.budget")
    return read, renamed, scopes


def scan():
    """({key: {daemon}}, {(old, new): {daemon}}, every backoff scope found)."""
    files = {path: strip_comments(path.read_text()) for path in loader_files()}
    found = {path: keys_in(text) for path, text in files.items()}
    loaders = {}  # common loader function -> its file
    for path, text in files.items():
        if (ROOT / "common") in path.parents:
            for name in LOADER_DEF.findall(text):
                loaders[name] = path
    keys, renamed, scopes = {}, {}, set()
    for daemon in daemons():
        todo = [p for p in files if (ROOT / "services" / daemon) in p.parents]
        seen = set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            todo += [loaders[f] for f in loaders if loaders[f] != path and re.search(rf"\b{f}\(", files[path])]
        for path in seen:
            read, pairs, found_scopes = found[path]
            for key in read:
                keys.setdefault(key, set()).add(daemon)
            for pair in pairs:
                renamed.setdefault(pair, set()).add(daemon)
            scopes |= found_scopes
    return keys, renamed, scopes


def doc_sections():
    return markdown_tables.sections(DOC)


def documented():
    """{key: (env, {daemon})} from the key table (a row: key, environment, daemons, type, default, meaning)."""
    found = {}
    for cells in rows(doc_sections()["Every key"]):
        m = re.fullmatch(r"`(" + KEY + r")`", cells[0])
        if m and len(cells) == 6:
            env = cells[1].strip("`")
            found[m.group(1)] = (env, {d.strip() for d in cells[2].split(",")})
    return found


def documented_renames():
    """{(old, new)} from the renamed table (a row: old key, new key, daemons)."""
    found = set()
    for cells in rows(doc_sections()["Renamed keys"]):
        old, new = (re.fullmatch(r"`(" + KEY + r")`", c) for c in cells[:2])
        if old and new:
            found.add((old.group(1), new.group(1)))
    return found


class ConfigKeys(unittest.TestCase):
    longMessage = False

    def test_the_scan_finds_every_daemon_and_every_form(self):
        # A scan that found nothing would pass every other test.
        keys, renamed, scopes = scan()
        for daemon in daemons():
            self.assertTrue(any(daemon in ds for ds in keys.values()), f"no key found for {daemon}")
        for key in ("database.url", "database.connect_timeout", "kafka.sasl_mechanism", "kafka.linger_ms",
                    "faults.timeout_rate", "acquirer.retry.backoff.budget", "log.level"):
            self.assertIn(key, keys, f"the scan misses {key}")
        self.assertIn(("server.port", "http.port"), renamed)
        self.assertTrue(BUDGETED <= scopes, f"a budgeted scope {BUDGETED - scopes} is no longer read")

    def test_every_key_read_is_documented_with_its_daemons(self):
        docs = documented()
        for key, readers in sorted(scan()[0].items()):
            self.assertIn(key, docs, f"{key} (read by {', '.join(sorted(readers))}) is not in docs/configuration.md")
            env, listed = docs[key]
            self.assertEqual(env, key.upper().replace(".", "_"), f"{key}: the environment variable is wrong")
            self.assertEqual(listed, readers, f"{key}: docs/configuration.md says {sorted(listed)}, "
                                              f"the code's readers are {sorted(readers)}")

    def test_every_documented_key_is_read(self):
        keys = scan()[0]
        for key in sorted(documented()):
            self.assertIn(key, keys, f"docs/configuration.md lists {key}, which no daemon reads")

    def test_every_renamed_key_is_in_the_renamed_table(self):
        code = set(scan()[1])
        docs = documented_renames()
        for old, new in sorted(code):
            self.assertIn((old, new), docs, f"{old} -> {new} (ConfigReader::Renamed) is not in the renamed table")
        for old, new in sorted(docs - code):
            self.fail(f"the renamed table lists {old} -> {new}, which no code refuses")

    def test_a_renamed_key_is_no_key_and_its_new_name_is_read(self):
        keys, renamed, _ = scan()
        docs = documented()
        for (old, new), readers in sorted(renamed.items()):
            self.assertNotIn(old, docs, f"{old} is renamed, yet the key table lists it")
            self.assertIn(new, keys, f"{old} is renamed to {new}, which no daemon reads")
            self.assertTrue(readers <= keys[new], f"{old}: refused by {sorted(readers)}, {new} read by {sorted(keys[new])}")


if __name__ == "__main__":
    unittest.main(verbosity=2)

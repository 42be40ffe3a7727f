"""Reading the tables of a Markdown document, for the tests that hold a document to the code
(tests/metrics: docs/metrics.md; tests/config: docs/configuration.md)."""
import re


def sections(path):
    """The document split at its '## ' headings: {heading: text}."""
    parts = re.split(r"^## (.+)$", path.read_text(), flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def rows(text):
    """The table rows of a text, as lists of cells (the header's separator row left out)."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("| ") and not line.startswith("| ---"):
            yield [c.strip() for c in line[1:-1].split("|")]

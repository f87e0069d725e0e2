"""Write the values table of the chart's README from values.yaml, as helm-docs does.

    python scripts/chart_values.py            # rewrite the table in charts/spark-dlq-operator/README.md
    python scripts/chart_values.py --check    # exit 1 when the README's table is not what values.yaml gives

Every key of values.yaml carries a ``# --`` comment (tests/unit/test_chart.py checks it); the
comment, the key's path, its type and its default make a row. A mapping whose keys are
documented one by one is described by its rows, not by a row of its own; a mapping documented
as a whole (resources, affinity, ...) is one row with its default as JSON. The table sits
between ``<!-- values:start -->`` and ``<!-- values:end -->``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "spark-dlq-operator"
START, END = "<!-- values:start -->", "<!-- values:end -->"
_KEY = re.compile(r"^( *)([A-Za-z][\w.-]*):")


@dataclass(frozen=True)
class Row:
    path: str
    description: str


def documented(lines: list[str]) -> list[Row]:
    """Every key with the ``# --`` comment above it (and its continuation lines), in file order."""
    rows: list[Row] = []
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        match = _KEY.match(line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        stack.append((indent, key))
        comment: list[str] = []
        above = number - 1
        while above >= 0 and lines[above].strip().startswith("#"):
            comment.insert(0, lines[above].strip().lstrip("#").strip())
            if lines[above].strip().startswith("# --"):
                break
            above -= 1
        if comment and comment[0].startswith("--"):
            comment[0] = comment[0][2:].strip()
            rows.append(Row(path, " ".join(comment)))
    return rows


def value_at(values: Any, path: str) -> Any:
    for key in path.split("."):
        values = values[key]
    return values


def type_of(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"), (list, "list")):
        if isinstance(value, kind):
            return name
    return "object"


def table(chart: Path = CHART) -> str:
    text = (chart / "values.yaml").read_text()
    values = yaml.safe_load(text)
    rows = documented(text.splitlines())
    paths = {row.path for row in rows}
    out = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for row in rows:
        value = value_at(values, row.path)
        if isinstance(value, dict) and any(p.startswith(row.path + ".") for p in paths):
            continue  # described by its keys' rows
        default = json.dumps(value, separators=(", ", ": ")) if value not in ("", None) else '""'
        description = row.description.replace("|", "\\|")
        out.append(f"| `{row.path}` | {type_of(value)} | `{default}` | {description} |")
    return "\n".join(out) + "\n"


def with_table(readme: str, generated: str) -> str:
    if START not in readme or END not in readme:
        raise SystemExit(f"the chart README has no {START} ... {END} block")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{generated}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the README is up to date")
    args = parser.parse_args(argv)
    readme_path = CHART / "README.md"
    readme = readme_path.read_text()
    wanted = with_table(readme, table())
    if args.check:
        if wanted != readme:
            print(
                "charts/spark-dlq-operator/README.md: the values table differs from values.yaml; "
                "run python scripts/chart_values.py",
                file=sys.stderr,
            )
            return 1
        return 0
    readme_path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())

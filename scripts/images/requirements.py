"""Print the requirements of one of this project's extras, for an image build.

    python requirements.py pyproject.toml engine --exclude pyspark

The images install the project's own wheel with ``--no-deps`` and its dependencies from this
list, so ``pyproject.toml`` stays the one place they are written: the project's dependencies,
then the extra's, without the project itself (``spark-dlq[...]``) and without the excluded
distributions (the Spark image has Spark; pip would otherwise install a second one).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib


def requirements(pyproject: dict[str, object], extra: str, exclude: set[str]) -> list[str]:
    project = pyproject["project"]
    assert isinstance(project, dict)
    extras = project.get("optional-dependencies") or {}
    if extra not in extras:
        raise SystemExit(f"no extra {extra!r} in pyproject.toml (there are: {', '.join(sorted(extras))})")
    own = str(project["name"])
    result: list[str] = []
    for requirement in [*project.get("dependencies", []), *extras[extra]]:
        name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
        key = name.lower().replace("_", "-")
        if key == own or key in exclude or requirement in result:
            continue
        result.append(requirement)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pyproject")
    parser.add_argument("extra")
    parser.add_argument("--exclude", action="append", default=[], help="a distribution to leave out")
    args = parser.parse_args(argv)
    with open(args.pyproject, "rb") as file:
        data = tomllib.load(file)
    exclude = {name.lower().replace("_", "-") for name in args.exclude}
    print("\n".join(requirements(data, args.extra, exclude)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""docs/reference.md is the repository's own reference: it must keep up with the code."""

from __future__ import annotations

import subprocess
import sys

from dlq_engine import exits
from dlq_engine.routing import headers
from spark_dlq_devtools.paths import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def test_crd_field_tables_are_generated_from_the_crd() -> None:
    check = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "crd_reference.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_header_the_engine_writes_is_documented() -> None:
    text = REFERENCE.read_text()
    names = [
        v for k, v in vars(headers).items() if k.isupper() and isinstance(v, str) and v.startswith("dlq.")
    ]
    assert len(names) > 10
    missing = [name for name in names if name != headers.PREFIX and f"`{name}`" not in text]
    assert not missing, missing


def test_every_exit_status_is_documented() -> None:
    text = REFERENCE.read_text()
    codes = [v for k, v in vars(exits).items() if k.startswith("EXIT_") and isinstance(v, int)]
    assert set(codes) == {0, 1, 2, 3, 4, 5}
    for code in codes:
        assert f"\n| {code} | " in text, code


def test_nothing_points_outside_the_repository() -> None:
    # The patterns are built here so that this file does not name them itself.
    outside, contract = "/".join(("..", "shared")), ".".join(("CONTRACT", "md"))
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "grep", "-l", "-F", "-e", outside, "-e", contract],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert tracked == []

"""The hand-written benchmark sections survive a rebuild of docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import report

pytestmark = pytest.mark.unit


def test_notes_come_in_the_order_of_their_numbers(tmp_path: Path) -> None:
    (tmp_path / "10-later.md").write_text("## 10. Later\n")
    (tmp_path / "2-first.md").write_text("## 2. First\n\ntext\n")
    assert report.notes(tmp_path) == ["## 2. First\n\ntext", "", "## 10. Later", ""]


def test_a_rebuilt_document_keeps_every_note(tmp_path: Path) -> None:
    doc = report.write(tmp_path / "benchmarks.md", tmp_path / "no-results")
    text = doc.read_text()
    for note in sorted(report.NOTES.glob("*.md")):
        assert note.read_text().splitlines()[0] in text, note.name

"""The set-up steps' cached step (scripts/setup/lib.sh): a folder with its marker is never built
again, a build happens beside the folder and lands whole, and what a failed build left is gone
by the next run. Run in bash on a scratch cache, with build functions that record their calls."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spark_dlq_devtools.paths import REPO_ROOT

LIB = REPO_ROOT / "scripts" / "setup" / "lib.sh"


def run(cache: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = f'set -euo pipefail\nSPARK_DLQ_CACHE="{cache}"\nsource "{LIB}"\n{body}\n'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)


BUILD = """
build() {  # build OUT WORD: records where it built, fails on WORD=fail
  echo "$1" >> "$SPARK_DLQ_CACHE/calls"
  echo "$2" > "$1/made"
  [[ "$2" != fail ]]
}
"""


def test_a_step_builds_beside_its_folder_then_says_it_is_cached(tmp_path: Path) -> None:
    dest = tmp_path / "tools" / "thing-1"
    first = run(tmp_path, BUILD + f'cached_step "{dest}" "thing 1" build ok')
    assert first.returncode == 0, first.stderr
    assert (dest / "made").read_text() == "ok\n"
    assert (dest / ".complete").exists()
    staged = Path((tmp_path / "calls").read_text().strip())
    assert staged.parent == dest.parent, "staged beside its folder: the move is a rename"
    assert staged.name.startswith("thing-1.partial-"), staged
    assert sorted(p.name for p in dest.parent.iterdir()) == ["thing-1"], "no staging folder left"
    assert f"thing 1: built into {dest}" in first.stderr

    again = run(tmp_path, BUILD + f'cached_step "{dest}" "thing 1" build other')
    assert again.returncode == 0, again.stderr
    assert again.stderr == f"[setup] thing 1: cached in {dest}\n"
    assert (dest / "made").read_text() == "ok\n"
    assert len((tmp_path / "calls").read_text().splitlines()) == 1, "a cached step runs no build"


def test_a_failed_build_leaves_no_folder_and_the_next_run_starts_clean(tmp_path: Path) -> None:
    dest = tmp_path / "thing"
    failed = run(tmp_path, BUILD + f'cached_step "{dest}" thing build fail')
    assert failed.returncode != 0
    assert not dest.exists(), "a failed build never takes the folder's place"
    assert [p.name.startswith("thing.partial-") for p in tmp_path.iterdir() if p.name != "calls"] == [True]

    rebuilt = run(tmp_path, BUILD + f'cached_step "{dest}" thing build ok')
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls", "thing"], "the failed staging is removed"


def test_an_in_place_step_builds_in_its_folder_with_its_own_marker(tmp_path: Path) -> None:
    dest = tmp_path / "bin"
    dest.mkdir()
    (dest / "kubectl").write_text("another step's binary\n")
    body = BUILD + f'cached_step --in-place --marker .complete-node "{dest}" "the node" build ok'
    first = run(tmp_path, body)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "calls").read_text() == f"{dest}\n"
    assert sorted(p.name for p in dest.iterdir()) == [".complete-node", "kubectl", "made"]
    assert run(tmp_path, body).stderr == f"[setup] the node: cached in {dest}\n"


def test_go_env_keeps_the_machines_toolchain_unless_one_is_named(tmp_path: Path) -> None:
    shown = 'echo "$GOPATH $GOMODCACHE $GOCACHE ${GOTOOLCHAIN-unset} ${GOFLAGS-unset}"'
    plain = run(tmp_path, f"unset GOTOOLCHAIN GOFLAGS; go_env; {shown}")
    assert plain.stdout.split() == [
        f"{tmp_path}/go",
        f"{tmp_path}/go/pkg/mod",
        f"{tmp_path}/go/cache",
        "unset",
        "unset",
    ]
    named = run(tmp_path, f"go_env go1.22.12 -mod=mod; {shown}")
    assert named.stdout.split()[3:] == ["go1.22.12", "-mod=mod"]
    flags_only = run(tmp_path, f'unset GOTOOLCHAIN; go_env "" -mod=readonly; {shown}')
    assert flags_only.stdout.split()[3:] == ["unset", "-mod=readonly"]

from __future__ import annotations

import pytest

from dlq_engine.job import warm_up


@pytest.mark.parametrize(
    ("master", "warmed"),
    [
        pytest.param("k8s://https://10.0.0.1:443", True, id="kubernetes"),
        pytest.param("local[1]", False, id="local-its-tasks-run-in-the-driver"),
        pytest.param("local[*]", False, id="local-every-core"),
    ],
)
def test_only_a_session_with_executor_processes_is_warmed(master: str, warmed: bool) -> None:
    assert warm_up.warms(master) is warmed

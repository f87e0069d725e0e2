"""The warm-up's task runs in a Python worker through the Arrow path routing takes, and loads
the policy's processor there (a processor that cannot load fails it: the task really ran)."""

from __future__ import annotations

from typing import Any

import pytest

from dlq_engine.job import warm_up
from dlq_engine.model import parse_policy
from tests.helpers import engine_policy

NAMES = {"source": "in", "retry": "retry", "dlq": "dlq", "output": "out"}


def test_the_warm_up_loads_the_processor_in_a_python_worker(spark: Any) -> None:
    warm_up.run(spark, parse_policy(engine_policy(NAMES, "127.0.0.1:9")))
    missing = engine_policy(NAMES, "127.0.0.1:9", processor={"entrypoint": "tests.processors.gone:process"})
    with pytest.raises(Exception, match=r"tests\.processors\.gone"):
        warm_up.run(spark, parse_policy(missing))

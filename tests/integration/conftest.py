"""Fixtures for the integration tier that build on the session services in tests/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.crds import DEADLETTERPOLICY_CRD, install_crds


@pytest.fixture(scope="session")
def dlp_crd(kube_api: Any) -> str:
    """The canonical DeadLetterPolicy CRD from ``crds/``, installed and serving; its name."""
    [name] = install_crds(kube_api, [DEADLETTERPOLICY_CRD])
    return name

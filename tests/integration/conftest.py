"""Fixtures for the integration tier that build on the session services in tests/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.crds import PROJECT_CRDS, install_crds


@pytest.fixture(scope="session")
def dlp_crd(kube_api: Any) -> str:
    """The canonical CRDs from ``crds/``, installed and serving; the DeadLetterPolicy's name."""
    names = install_crds(kube_api, PROJECT_CRDS)
    return names[0]

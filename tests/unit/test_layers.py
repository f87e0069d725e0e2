"""Every module of the engine and the operator has its place in an import-linter layers contract
(pyproject.toml), so a new module cannot slip in beside the layering unchecked."""

from __future__ import annotations

import tomllib

import pytest

from spark_dlq_devtools.paths import REPO_ROOT

PACKAGES = {
    "dlq_engine": REPO_ROOT / "spark_image" / "dlq_engine",
    "spark_dlq_operator": REPO_ROOT / "operator" / "spark_dlq_operator",
}


def _layered() -> set[str]:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    named: set[str] = set()
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] != "layers":
            continue
        containers = contract.get("containers") or [""]
        for layer in contract["layers"]:
            for module in layer.split("|"):
                for container in containers:
                    named.add(f"{container}.{module.strip()}" if container else module.strip())
    return named


def _modules(package: str) -> list[str]:
    root = PACKAGES[package]
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            continue
        found.append(".".join((package, *parts)))
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_is_in_a_layer(package: str) -> None:
    named = _layered()
    unplaced = [m for m in _modules(package) if not any(m == n or m.startswith(n + ".") for n in named)]
    assert not unplaced, f"add these to a layers contract in pyproject.toml: {unplaced}"


def test_the_check_sees_the_modules() -> None:
    assert "dlq_engine.processing.time_limit" in _modules("dlq_engine")
    assert len(_modules("spark_dlq_operator")) >= 11

"""Shared fixtures of the posenc Python tests.

Run from the repository root after building the release preset:
    PYTHONPATH=build/release/python /usr/bin/python3 -m pytest -q python/tests
"""
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = ROOT / "python" / "examples"


def golden(name):
    """A fixture file of tests/golden (see its README for the schema)."""
    with open(GOLDEN / name) as f:
        return json.load(f)


@pytest.fixture(scope="session")
def rope_apply():
    return golden("rope_apply.json")


@pytest.fixture(scope="session")
def rope_init():
    return golden("rope_init.json")


def pytest_collection_modifyitems(session, config, items):
    """Every test file must contribute tests: a file that silently collects
    nothing (a typo in a name, an import guard) fails the run."""
    if config.getoption("keyword") or config.getoption("markexpr"):
        return
    if any(not pathlib.Path(a.split("::")[0]).is_dir() for a in config.args):
        return  # a file or a single test was picked by hand
    files = {p.name for p in pathlib.Path(__file__).parent.glob("test_*.py")}
    seen = {pathlib.Path(str(item.fspath)).name for item in items}
    missing = sorted(files - seen)
    if missing:
        raise pytest.UsageError(f"test files that collected no tests: {missing}")

"""Shared fixtures of the Python suites (docs/python.md, "Tests").

The suites need numpy and pytest; the torch suites skip, saying so, when torch
(or transformers, or the MiniLM weights package) is not installed.
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # a shared 2-core machine
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import xattn  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def backend_available(name: str) -> bool:
    return xattn.backends()[name]["available"]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def torch_mod():
    return pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")


@pytest.fixture(scope="session")
def xattn_tool():
    """The C tool (xattn bench --cases): $XATTN_TOOL, else a build of this repository."""
    env = os.environ.get("XATTN_TOOL")
    if env:
        return env
    for preset in ("ci", "release", "debug", "asan"):
        p = REPO / "build" / preset / "bench" / "xattn"
        if p.exists():
            return str(p)
    pytest.skip("the xattn tool is not built here (set XATTN_TOOL or build a preset)")


def pytest_report_header(config):
    return [f"xattn {xattn.version()} from {xattn.library_path}",
            "backends: " + ", ".join(f"{k}={'yes' if v['available'] else 'no'}" for k, v in xattn.backends().items()),
            f"python {sys.version.split()[0]}, numpy {np.__version__}"]

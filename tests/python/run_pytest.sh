#!/usr/bin/env bash
# run_pytest.sh MODULE_DIR VRUN PYTEST_ARGS...: pytest in the venv of scripts/setup-python-venv.sh
# (numpy, pytest, Ray) with the built module first on PYTHONPATH and the CLI it is compared with.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module_dir="$(cd "$1" && pwd)" vrun="$(realpath "$2")"
shift 2
py="$(bash "$here/../../scripts/setup-python-venv.sh")"
cd "$here"
export PYTHONPATH="$module_dir${PYTHONPATH:+:$PYTHONPATH}" VRUN_CLI="$vrun" PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider "$@"

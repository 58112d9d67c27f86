#!/usr/bin/env bash
# run_serve_test.sh VRUN CASE: serve_test.py in the venv with the openai client.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="$(bash "$here/../../scripts/setup-serve-venv.sh")"
exec "$py" "$here/serve_test.py" "$@"

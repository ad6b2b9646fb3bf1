#!/usr/bin/env bash
# Bootstrap a virtual environment in .venv (once, and again whenever pyproject.toml changes), then:
#   ./dev.sh run   [ARGS]  run `tinyhil run` on every emulated target (ARGS go to `tinyhil run`)
#   ./dev.sh test  [ARGS]  run the full test suite (ARGS go to pytest)
#   ./dev.sh lint          ruff (lint + format check) and mypy --strict
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
VENV=${TINYHIL_VENV:-.venv}

bootstrap() {
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "dev.sh: tinyhil needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2
        exit 2
    fi
    local stamp="$VENV/.tinyhil-installed"
    local extras=dev,farm,nv
    # tinyhil serve usb's PyGObject builds from source: only where its C libraries' headers are installed
    if pkg-config --exists gobject-introspection-1.0 cairo 2>/dev/null; then extras+=,serve; fi
    local want
    want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
    if [[ ! -x "$VENV/bin/python" ]]; then
        echo "dev.sh: creating $VENV" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
        echo "dev.sh: installing tinyhil and its development dependencies into $VENV" >&2
        "$VENV/bin/python" -m pip install -q --upgrade pip
        "$VENV/bin/python" -m pip install -q -e ".[$extras]"
        echo "$want" > "$stamp"
    fi
}

command=${1:-}
[[ $# -gt 0 ]] && shift
case "$command" in
    run)
        bootstrap
        exec "$VENV/bin/tinyhil" run "$@"
        ;;
    test)
        bootstrap
        exec "$VENV/bin/python" -m pytest -n "${TINYHIL_TEST_WORKERS:-2}" "$@"
        ;;
    lint)
        bootstrap
        "$VENV/bin/ruff" check .
        "$VENV/bin/ruff" format --check .
        exec "$VENV/bin/python" .ci/typecheck.py
        ;;
    *)
        echo "usage: ./dev.sh run|test|lint [ARGS]" >&2
        exit 2
        ;;
esac

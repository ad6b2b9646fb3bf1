"""How a pytest run refuses a bad option (``from support.usage_errors import assert_one_usage_error``)."""

from __future__ import annotations

import pytest


def assert_one_usage_error(result: pytest.RunResult, *fragments: str) -> None:
    """Exit status 4, one ``ERROR:`` line holding every fragment, no traceback."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1, result.stderr.str()
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()

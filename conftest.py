"""Repository-level pytest configuration: hypothesis profiles, the ``fuzz`` marker, and run history kept off the
user's home (every test runs with ``$TINYHIL_HISTORY=none``; a test of history passes ``--history`` in its
``tmp_path``).

``ci`` (selected when ``CI`` is set) is derandomized and keeps no example database, so CI runs are reproducible;
``dev`` is the default for laptops; ``nightly`` (``HYPOTHESIS_PROFILE=nightly``) runs every property and fuzz test
with 50 times the examples, randomized. Fuzz tests (``@pytest.mark.fuzz``, in ``test_fuzz_*.py`` files) leave
``max_examples`` to the profile so the nightly setting reaches them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tinyhil.device_farm.history.settings import HISTORY_ENV, NO_HISTORY

NIGHTLY_EXAMPLES = 5_000

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.register_profile(
    "nightly",
    max_examples=NIGHTLY_EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(autouse=True, scope="session")
def _no_history_in_home() -> Iterator[None]:
    """Runs a test makes record nothing unless it names a database (``--history``), never in the user's home; set
    for the whole session, so a run made by a module- or session-scoped fixture is covered too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(HISTORY_ENV, NO_HISTORY)
        yield


@pytest.fixture(autouse=True, scope="session")
def _private_lock_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Board leases of the tests' farm runs in a directory of this session, never the host's /run/lock/tinyhil
    (a test that needs its own sets ``TINYHIL_LOCK_DIR`` itself)."""
    os.environ["TINYHIL_LOCK_DIR"] = str(tmp_path_factory.mktemp("locks"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fuzz: a property-based fuzz test of an entry point (run longer with HYPOTHESIS_PROFILE=nightly; select "
        "with -m fuzz)",
    )

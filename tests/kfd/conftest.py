"""The client's tests run against MOCKKFD over the memory-only fake GPUs of tests/mocks/kfd."""

from __future__ import annotations

from support.scripts import TESTS, load_script

_shared = load_script(TESTS / "mocks" / "kfd" / "conftest.py", "tinyhil_tests_kfd_shared_fixtures")

kernel = _shared.kernel
make_mock = _shared.make_mock
mock = _shared.mock
kfd = _shared.kfd
load_fake_gpu = _shared.load_fake_gpu
raw = _shared.raw
helpers = _shared.helpers

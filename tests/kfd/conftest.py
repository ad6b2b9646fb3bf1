"""The client's tests run against MOCKKFD over the memory-only fake GPUs of tests/mocks/kfd."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SHARED = Path(__file__).resolve().parent.parent / "mocks" / "kfd" / "conftest.py"
_spec = importlib.util.spec_from_file_location("tinyhil_tests_kfd_shared_fixtures", _SHARED)
assert _spec is not None and _spec.loader is not None
_shared = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _shared
_spec.loader.exec_module(_shared)

kernel = _shared.kernel
make_mock = _shared.make_mock
mock = _shared.mock
kfd = _shared.kfd
load_fake_gpu = _shared.load_fake_gpu
raw = _shared.raw
helpers = _shared.helpers

"""The modules of tinyhil.kfd import each other without cycles (``TYPE_CHECKING`` imports included), and the seams
that break the old client <-> GPU <-> queue cycle work on their own."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import tinyhil.kfd
from tinyhil.kfd import KfdQueue, QueueEngine

_PACKAGE = "tinyhil.kfd"


def _module_files() -> dict[str, Path]:
    (folder,) = (Path(entry) for entry in tinyhil.kfd.__path__)
    files = {f"{_PACKAGE}.{path.stem}": path for path in folder.glob("*.py") if path.stem != "__init__"}
    files[_PACKAGE] = folder / "__init__.py"
    return files


def _imported(source: str, module: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports anywhere, ``if TYPE_CHECKING:``
    blocks and function bodies included; ``from package import submodule`` counts as importing the submodule."""
    package = module if module == _PACKAGE else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found & known - {module}


def _graph() -> dict[str, set[str]]:
    files = _module_files()
    known = set(files)
    return {module: _imported(path.read_text(), module, known) for module, path in files.items()}


def test_the_graph_sees_type_checking_and_relative_imports() -> None:
    known = {"tinyhil.kfd", "tinyhil.kfd.gpu", "tinyhil.kfd.client", "tinyhil.kfd.queue"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import queue\n"
        "if TYPE_CHECKING:\n"
        "    from tinyhil.kfd.client import KFD\n"
    )
    assert _imported(source, "tinyhil.kfd.gpu", known) == {"tinyhil.kfd.client", "tinyhil.kfd.queue"}


def test_the_graph_covers_the_client_gpu_and_queue() -> None:
    graph = _graph()
    assert {"tinyhil.kfd.client", "tinyhil.kfd.gpu", "tinyhil.kfd.queue", "tinyhil.kfd.process"} <= set(graph)
    assert "tinyhil.kfd.gpu" in graph["tinyhil.kfd.client"] and "tinyhil.kfd.queue" in graph["tinyhil.kfd.gpu"]
    assert "tinyhil.kfd.process" in graph["tinyhil.kfd.gpu"]


def test_no_module_of_tinyhil_kfd_imports_one_that_imports_it_back() -> None:
    sorter = graphlib.TopologicalSorter(_graph())
    try:
        order = list(sorter.static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle in {_PACKAGE}: {' -> '.join(exc.args[1])}")
    assert order.index("tinyhil.kfd.queue") < order.index("tinyhil.kfd.gpu") < order.index("tinyhil.kfd.client")


class _Memory:
    """Host bytes standing in for a GPU-mapped buffer (the :class:`~tinyhil.kfd.QueueMemory` protocol)."""

    def __init__(self, va: int, nbytes: int) -> None:
        self.va = va
        self.data = bytearray(nbytes)

    def read(self, offset: int, nbytes: int) -> bytes:
        return bytes(self.data[offset : offset + nbytes])

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        self.data[offset : offset + len(data)] = data


def test_a_queue_needs_only_its_memory_and_a_destroy_callback() -> None:
    ring, rptr, wptr = _Memory(0x1000, 64), _Memory(0x2000, 8), _Memory(0x3000, 8)
    doorbells = bytearray(16)
    destroyed: list[KfdQueue] = []
    queue = KfdQueue(QueueEngine.SDMA, 3, 0x1234, (ring, 64), (rptr, wptr), (memoryview(doorbells), 8),
                     destroy=destroyed.append)  # fmt: skip
    assert queue.submit(b"\x01" * 16) == 16
    assert ring.data[:16] == b"\x01" * 16 and wptr.data == (16).to_bytes(8, "little")
    assert doorbells[8:16] == (16).to_bytes(8, "little") and not queue.idle
    queue.destroy()
    assert destroyed == [queue] and "gpu_id=0x1234" in repr(queue)

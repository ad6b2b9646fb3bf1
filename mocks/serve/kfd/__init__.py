"""``tinyhil serve kfd``: MOCKKFD served as ``/dev/kfd`` to processes that never import tinyhil (docs/serve.md)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["serve_kfd"]


def serve_kfd(target: str, options: Sequence[str], command: Sequence[str]) -> int:
    """Run ``command`` with ``target`` (``options``: ``KEY=VALUE`` target options) as its ``/dev/kfd``; returns the
    command's exit status."""
    raise NotImplementedError("tinyhil serve kfd is not built yet")

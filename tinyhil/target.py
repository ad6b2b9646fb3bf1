"""Target strings: ``[IFACE[:index]+]DEVICE[:index][:renderer[:arch]]``.

The grammar follows the ``DEV`` convention tinygrad users know: ``MOCKUSB+AMD``, ``MOCKKFD+AMD:LLVM:gfx1100``,
``USB:1+AMD``, ``NV:1``, ``NULL``, ``NULL:QCOMCL:a630``. Interface, device and renderer are case-insensitive and kept
upper case; the arch keeps its spelling (``gfx1100``, ``a630``, ``aarch64``). The index says which device of its kind:
on the interface when there is one (``KFD:1+AMD``), else on the device (``NV:1``), never both; a renderer is a name,
so a decimal number after the device can only be an index. It is at most :data:`INDEX_MAX` (65535: more devices than
any host holds; a target may bound it further); leading zeros are allowed and dropped (``USB:007+AMD`` is
``USB:7+AMD``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = ["GRAMMAR", "INDEX_MAX", "TargetString", "parse_target"]

GRAMMAR: Final = "[IFACE[:index]+]DEVICE[:index][:renderer[:arch]]"
INDEX_MAX: Final = 0xFFFF
_SHOWN_CHARS: Final = 80  # a longer string or part is shown cut, with its length
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_INDEX = re.compile(r"[0-9]+")
_ARCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass(frozen=True, slots=True)
class TargetString:
    """A parsed target string; ``str()`` gives its canonical spelling."""

    device: str
    iface: str | None = None
    index: int | None = None
    renderer: str | None = None
    arch: str | None = None

    def __post_init__(self) -> None:
        if self.index is not None and (type(self.index) is not int or not 0 <= self.index <= INDEX_MAX):
            shown = f"{self.index:#x}" if isinstance(self.index, int) else f"{type(self.index).__name__} object"
            raise InvalidArgument(f"index={shown}, expected an int in 0..{INDEX_MAX}")
        if self.arch is not None and self.renderer is None:
            raise InvalidArgument(f"arch={self.arch!r} given without a renderer, expected DEVICE:renderer:arch")

    @property
    def base(self) -> str:
        """The interface and device without index, renderer or arch (``MOCKKFD+AMD``)."""
        return f"{self.iface}+{self.device}" if self.iface else self.device

    def __str__(self) -> str:
        text = self.device
        if self.iface is not None:
            iface = self.iface if self.index is None else f"{self.iface}:{self.index}"
            text = f"{iface}+{text}"
        elif self.index is not None:
            text += f":{self.index}"
        if self.renderer is not None:
            text += f":{self.renderer}"
        if self.arch is not None:
            text += f":{self.arch}"
        return text


def _shown(text: str) -> str:
    """``repr(text)``, cut to its first characters (and its length) when it is long."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}... ({len(text)} characters)"


def _index(text: str, given: str, what: str) -> int:
    if not _INDEX.fullmatch(given):
        raise _bad(text, given, f"{what} must be a decimal number")
    digits = given.lstrip("0") or "0"
    if len(digits) > len(str(INDEX_MAX)) or int(digits) > INDEX_MAX:
        raise _bad(text, given, f"{what} must be at most {INDEX_MAX}")
    return int(digits)


def _bad(text: str, part: str, why: str) -> InvalidArgument:
    return InvalidArgument(
        f"target string {_shown(text)}: {why} ({_shown(part)}); expected {GRAMMAR}, e.g. MOCKUSB+AMD, NULL"
    )


def parse_target(text: str) -> TargetString:
    """Parse a target string.

    Raises:
        InvalidArgument (a ``ValueError``): ``text`` is not a str, does not follow the grammar, or has an interface
            index past :data:`INDEX_MAX`; the message names the bad part.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"target={type(text).__name__} object, expected a target string of the form {GRAMMAR}")
    stripped = text.strip()
    if not stripped:
        raise _bad(text, stripped, "empty target string")
    iface: str | None = None
    index: int | None = None
    rest = stripped
    if "+" in stripped:
        head, _, rest = stripped.partition("+")
        if "+" in rest:
            raise _bad(text, rest, "more than one '+'")
        iface_name, colon, index_text = head.partition(":")
        if not _NAME.fullmatch(iface_name):
            raise _bad(text, iface_name, "interface must be a name such as USB, MOCKUSB, KFD")
        iface = iface_name.upper()
        if colon:
            index = _index(text, index_text, "interface index")
    parts = rest.split(":")
    device = parts[0]
    if not _NAME.fullmatch(device):
        raise _bad(text, device, "device must be a name such as AMD, NV, NULL")
    if len(parts) > 1 and _INDEX.fullmatch(parts[1]):
        if iface is not None:
            raise _bad(text, parts[1], f"the index goes on the interface ({iface}:{parts[1]}+{device.upper()})")
        index = _index(text, parts[1], "device index")
        parts = [device, *parts[2:]]
    if len(parts) > 3:
        raise _bad(text, ":".join(parts[3:]), "too many ':' parts after the device")
    renderer = parts[1] if len(parts) > 1 else None
    if renderer is not None and not _NAME.fullmatch(renderer):
        raise _bad(text, renderer, "renderer must be a name such as CC, LLVM, QEMUCC")
    arch = parts[2] if len(parts) > 2 else None
    if arch is not None and not _ARCH.fullmatch(arch):
        raise _bad(text, arch, "arch must be a name such as gfx1100 or aarch64")
    return TargetString(
        device=device.upper(),
        iface=iface,
        index=index,
        renderer=renderer.upper() if renderer is not None else None,
        arch=arch,
    )

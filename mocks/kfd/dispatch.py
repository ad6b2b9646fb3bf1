"""The /dev/kfd ioctl entry: decode the request, copy the argument in, run the handler, copy it out.

The rules are those of ``kfd_ioctl()`` in drivers/gpu/drm/amd/amdkfd/kfd_chardev.c (as of upstream commit
57af162bfc8c, "drm/amdkfd: return -ENOTTY for unsupported IOCTLs", also in the stable kernels; before it an unknown
number was ``EINVAL``); a client built against an older uapi (a smaller struct) or a newer one (a bigger
struct) sees exactly what Linux gives it:

1. The request is looked up by its number alone, ``nr = _IOC_NR(request)``. A number at or past the table's end,
   or outside ``[AMDKFD_COMMAND_START, AMDKFD_COMMAND_END)``, is ``ENOTTY``. The caller's type byte and direction
   bits are never checked: after the lookup the kernel uses its own table's request ("do not trust userspace").
2. ``usize = _IOC_SIZE(request)`` is the caller's size, ``asize = max(usize, _IOC_SIZE(kernel request))`` the
   size of the kernel buffer the handler runs on.
3. For a kernel request with ``_IOC_WRITE``, ``usize`` bytes are copied from the caller (a fault is ``EFAULT``
   and the handler does not run) and the rest of the buffer up to ``asize`` is zero; otherwise the whole buffer is
   zero. So a shorter struct reaches the handler zero-extended, and a longer one's extra bytes are not looked at.
4. The handler runs on the buffer; then, for a kernel request with ``_IOC_READ``, ``usize`` bytes go back to the
   caller whether or not the handler failed (so ``n_success`` and ``wait_result`` reach it): the handler's struct
   truncated to a shorter caller, followed by the buffer's tail for a longer one (the caller's own bytes for a
   write-direction request, zeros otherwise). A fault there is ``EFAULT``, which replaces the handler's errno.
   MOCKKFD knows before the handler runs whether that copy will fault (the argument is all the user memory there
   is), and then answers the same ``EFAULT`` without running it: where Linux keeps the handler's effect (an event
   created, a buffer allocated that the caller never learns of), a refused request changes nothing here.

MOCKKFD models the argument (a ctypes object or any contiguous buffer) as the only user memory there is: reading
``usize`` bytes from a shorter one, or writing into a shorter or read-only one, faults (and a write that would
fault copies nothing, where the kernel may copy the bytes before the fault). Anything that is not a buffer is
memory of no bytes, which a ``usize`` of 0 never touches. Every slot of the KFD 1.11 table has a handler (an empty
slot would be ``EINVAL``, "no function"). The deprecated debugger requests' handlers answer ``EPERM`` as the
kernel's do, after the copy-in; a request MOCKKFD does not emulate answers ``ENOTTY`` from its handler, with a log
line naming it. A ``/dev/kfd`` file used by a process other than the one that opened it (a forked child) is
``EBADF`` before any of this, in :meth:`MockFileIO.ioctl`, as in ``kfd_ioctl()``. Not modelled: ``CRIU_OP``'s
capability check (``EACCES``; CRIU is not emulated), and the requests fs/ioctl.c answers before any driver sees
them (``FIOCLEX``, ``FIONBIO``, ...).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from tinyhil.fileio.arguments import user_memory
from tinyhil.mocks.kfd._errno import fail
from tinyhil.spec.kfd_ioctls import (
    AMDKFD_COMMAND_END,
    AMDKFD_COMMAND_START,
    IOCTLS,
    KFD_IOCTL_MAJOR_VERSION,
    KFD_IOCTL_MINOR_VERSION,
    IoctlDef,
    KfdIoctl,
)
from tinyhil.spec.kfd_memory import kfd_ioctl_set_xnack_mode_args
from tinyhil.spec.kfd_process import kfd_ioctl_get_clock_counters_args, kfd_ioctl_get_version_args
from tinyhil.spec.linux_ioctl import IocDir, ioc_dir, ioc_nr, ioc_size

if TYPE_CHECKING:
    from tinyhil.mocks.kfd.device import MockKFD

__all__ = ["DEPRECATED", "IoctlDispatcher"]

_OP_PREFIX: Final = "_op_"
_K = KfdIoctl
DEPRECATED: Final = frozenset({
    _K.AMDKFD_IOC_DBG_REGISTER_DEPRECATED,
    _K.AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED,
    _K.AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
    _K.AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED,
})  # fmt: skip
_NS_PER_SECOND: Final = 1_000_000_000


def _fault(definition: IoctlDef, way: str, user: memoryview, user_size: int) -> str:
    """The message of a copy ``from`` / ``to`` the user that faults."""
    held = f"{len(user):#x}-byte{' read-only' * user.readonly} argument"
    needed = "a writable buffer" if way == "to" else "a buffer"
    return (
        f"{definition.name}: copying the {user_size:#x} bytes the request encodes {way} a {held} faults; "
        f"expected {needed} of at least {user_size:#x} bytes"
    )


class IoctlDispatcher:
    """Routes requests to the ``_op_`` handlers of the memory, queue and event parts and of itself."""

    def __init__(self, kfd: MockKFD) -> None:
        self.kfd = kfd
        self.handlers: dict[KfdIoctl, Callable[[Any], None]] = {}
        for part in (self, kfd.memory, kfd.queues, kfd.events):
            for name in dir(part):
                if name.startswith(_OP_PREFIX):
                    request = KfdIoctl["AMDKFD_IOC_" + name.removeprefix(_OP_PREFIX).upper()]
                    self.handlers[request] = getattr(part, name)

    def ioctl(self, request: int, buf: Any) -> int:
        """Run one request on /dev/kfd with ``buf`` (a ctypes object or a buffer) as the argument.

        ``request`` is an int of 32 bits: the seam (``MockFileIO.ioctl``) checked and truncated it.

        Returns 0; the argument holds what the kernel copies back.

        Raises:
            OSError: the errno the kernel returns.
        """
        nr = ioc_nr(request)
        definition = IOCTLS.get(nr)
        if definition is None or not AMDKFD_COMMAND_START <= nr < AMDKFD_COMMAND_END:
            fail(
                errno.ENOTTY,
                f"request {request:#x} (nr {nr:#x}) is not an amdkfd ioctl of KFD 1.{KFD_IOCTL_MINOR_VERSION}",
            )
        user_size = ioc_size(request)
        direction = ioc_dir(definition.request)  # the kernel's own, whatever the caller encoded
        user = user_memory(buf)
        kdata = bytearray(max(user_size, ioc_size(definition.request)))
        if direction & IocDir.IOC_WRITE:
            if len(user) < user_size:
                fail(errno.EFAULT, _fault(definition, "from", user, user_size))
            kdata[:user_size] = user[:user_size]
        copies_back = bool(direction & IocDir.IOC_READ and user_size)  # copying no bytes never faults
        if copies_back and (user.readonly or len(user) < user_size):
            # Linux runs the handler first and keeps its effect; the errno is the same, and MOCKKFD changes nothing
            fail(errno.EFAULT, _fault(definition, "to", user, user_size))
        error: OSError | None = None
        try:
            self._run(definition, definition.args.from_buffer(kdata))
        except OSError as exc:
            error = exc
        if copies_back:
            user[:user_size] = memoryview(kdata)[:user_size]
        if error is not None:
            raise error
        return 0

    def _run(self, definition: IoctlDef, args: Any) -> None:
        """The table slot's function on the kernel buffer: an ``_op_`` handler, or the kernel's refusal."""
        handler = self.handlers.get(definition.request)
        if handler is not None:
            handler(args)
        elif definition.request in DEPRECATED:
            fail(errno.EPERM, f"{definition.name} is deprecated; the kernel refuses it")
        else:
            fail(errno.ENOTTY, f"{definition.name} is not emulated by MOCKKFD")

    # --- the ioctls that belong to no part ---------------------------------------------------------------------------
    def _op_get_version(self, args: kfd_ioctl_get_version_args) -> None:
        args.major_version = KFD_IOCTL_MAJOR_VERSION
        args.minor_version = KFD_IOCTL_MINOR_VERSION

    def _op_get_clock_counters(self, args: kfd_ioctl_get_clock_counters_args) -> None:
        pdd = self.kfd.process.pdds.get(args.gpu_id)
        args.gpu_clock_counter = 0 if pdd is None else pdd.gpu.port.timestamp()
        now = self.kfd.kernel.now_ns
        args.cpu_clock_counter = args.system_clock_counter = now
        args.system_clock_freq = _NS_PER_SECOND

    def _op_set_xnack_mode(self, args: kfd_ioctl_set_xnack_mode_args) -> None:
        what = "AMDKFD_IOC_SET_XNACK_MODE"
        process = self.kfd.process
        if args.xnack_enabled < 0:
            args.xnack_enabled = process.xnack_enabled
            return
        if process.queues:
            fail(
                errno.EBUSY,
                f"{what}: the process has {len(process.queues)} queues; change XNACK mode before creating any",
            )
        if args.xnack_enabled and not process.xnack_enabled:
            fail(errno.EPERM, f"{what}: the emulated GPUs do not retry faults (XNACK off only)")

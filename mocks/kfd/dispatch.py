"""The /dev/kfd ioctl entry: decode the request, copy the argument in, run the handler, copy it out.

Like ``kfd_ioctl()``: a number outside the table is ``ENOTTY``; the argument is copied in for ``_IOC_WRITE``
requests and zeroed otherwise; output is copied back for ``_IOC_READ`` requests even when the handler fails (so
``n_success`` and ``wait_result`` reach the caller). One deliberate difference: the kernel accepts a request
whose encoded size differs from its own structure (it zero-extends or truncates), MOCKKFD answers ``EINVAL`` so a
client built against a mismatched header fails loudly in tests. Handlers are ``_op_<name>`` methods keyed by the
spec's request names; deprecated debugger requests answer ``EPERM`` as the kernel does, and requests MOCKKFD does
not emulate answer ``ENOTTY`` with a log line naming them.
"""

from __future__ import annotations

import ctypes
import errno
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from tinyhil.kfd import uapi as u
from tinyhil.kfd.ioctls import (
    AMDKFD_COMMAND_END,
    AMDKFD_COMMAND_START,
    IOCTLS,
    IocDir,
    KfdIoctl,
    ioc_dir,
    ioc_nr,
    ioc_size,
    ioc_type,
)
from tinyhil.mocks.kfd._errno import fail

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
        """Run one request on /dev/kfd with ``buf`` (a ctypes object or bytearray) as the argument.

        Raises:
            OSError: the errno the kernel returns.
        """
        nr = ioc_nr(request)
        definition = IOCTLS.get(nr)
        if definition is None or not AMDKFD_COMMAND_START <= nr < AMDKFD_COMMAND_END:
            fail(
                errno.ENOTTY,
                f"request {request:#x} (nr {nr:#x}) is not an amdkfd ioctl of KFD 1.{u.KFD_IOCTL_MINOR_VERSION}",
            )
        size = ctypes.sizeof(definition.args)
        if request != definition.request:
            encoded = f"dir={ioc_dir(request)} type={ioc_type(request):#x} size={ioc_size(request)}"
            expected = f"{int(definition.request):#x} (dir={ioc_dir(definition.request)}, type 'K', size {size})"
            fail(errno.EINVAL, f"request {request:#x} has nr {nr:#x} ({definition.name}) but encodes {encoded}; "
                               f"expected {expected}")  # fmt: skip
        try:
            view = memoryview(buf).cast("B")
        except (TypeError, ValueError):
            fail(errno.EFAULT, f"{definition.name}: argument {type(buf).__name__} is not a contiguous buffer")
        if view.readonly or len(view) < size:
            fail(errno.EFAULT, f"{definition.name}: argument of {len(view)} bytes{' (read-only)' * view.readonly}, "
                               f"expected a writable {size}-byte {definition.args.__name__}")  # fmt: skip
        direction = ioc_dir(request)
        args = definition.args.from_buffer_copy(view[:size]) if direction & IocDir.IOC_WRITE else definition.args()
        handler = self.handlers.get(definition.request)
        if definition.request in DEPRECATED:
            fail(errno.EPERM, f"{definition.name} is deprecated; the kernel refuses it")
        if handler is None:
            fail(errno.ENOTTY, f"{definition.name} is not emulated by MOCKKFD")
        try:
            handler(args)
        finally:
            if direction & IocDir.IOC_READ:
                view[:size] = bytes(memoryview(args).cast("B"))
        return 0

    # --- the ioctls that belong to no part ---------------------------------------------------------------------------
    def _op_get_version(self, args: u.kfd_ioctl_get_version_args) -> None:
        args.major_version = u.KFD_IOCTL_MAJOR_VERSION
        args.minor_version = u.KFD_IOCTL_MINOR_VERSION

    def _op_get_clock_counters(self, args: u.kfd_ioctl_get_clock_counters_args) -> None:
        pdd = self.kfd.process.pdds.get(args.gpu_id)
        args.gpu_clock_counter = 0 if pdd is None else pdd.gpu.port.timestamp()
        now = self.kfd.kernel.now_ns
        args.cpu_clock_counter = args.system_clock_counter = now
        args.system_clock_freq = _NS_PER_SECOND

    def _op_set_xnack_mode(self, args: u.kfd_ioctl_set_xnack_mode_args) -> None:
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

"""The usbdevfs server's answers, request by request, through a stand-in for umockdev's client (no umockdev needed).

:class:`FakeClient` keeps a client's memory the way umockdev's ``IoctlData`` reaches it: ``resolve`` reads the
block a pointer names, ``update`` changes the local copy, ``set_ptr`` points a pointer at a block, and ``complete``
writes every changed block back.
"""

from __future__ import annotations

import errno
import struct

import pytest

from tinyhil.emulators.asm2464 import WAIT_CAP_NS, UsbStatus
from tinyhil.mocks.serve.usb import UsbdevfsServer, served_board
from tinyhil.mocks.serve.usb.descriptors import describe_board
from tinyhil.mocks.serve.usb.server import ClientState
from tinyhil.mocks.serve.usb.usbdevfs import (
    BULK_TRANSFER,
    CTRL_TRANSFER,
    POINTER,
    SERVED_CAPABILITIES,
    SETINTERFACE,
    STATUS_TO_ERRNO,
    UINT32,
    URB,
    Request,
    UrbType,
)
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP, Xdata
from tinyhil.spec.asm2464 import Request as Vendor

_NS_PER_MS = 1_000_000


class Memory:
    """A client's address space: blocks at addresses."""

    def __init__(self) -> None:
        self.blocks: dict[int, bytearray] = {}
        self._next = 0x1000

    def alloc(self, data: bytes) -> int:
        address = self._next
        self.blocks[address] = bytearray(data)
        self._next += max(len(data), 8) + 0x100
        return address

    def read(self, address: int, length: int) -> bytes:
        return bytes(self.blocks[address][:length])


class FakeData:
    """umockdev's ``IoctlData`` over :class:`Memory`."""

    def __init__(self, memory: Memory, client_addr: int, data: bytes) -> None:
        self.memory, self.client_addr, self.data = memory, client_addr, bytearray(data)
        self.children: dict[int, FakeData] = {}

    def resolve(self, offset: int, length: int) -> FakeData | None:
        address = POINTER.unpack_from(self.data, offset)[0]
        if address == 0 or length == 0:
            return None
        child = FakeData(self.memory, address, self.memory.read(address, length))
        self.children[offset] = child
        return child

    def retrieve(self) -> bytes:
        return bytes(self.data)

    def update(self, offset: int, data: bytes) -> None:
        self.data[offset : offset + len(data)] = data

    def set_ptr(self, offset: int, child: FakeData) -> None:
        self.children[offset] = child

    def flush(self) -> None:
        for offset, child in self.children.items():
            child.flush()
            POINTER.pack_into(self.data, offset, child.client_addr)
        if self.client_addr:
            self.memory.blocks[self.client_addr][: len(self.data)] = self.data


class FakeClient:
    """One open file of the node; ``ioctl`` runs one request through the server and returns ``(result, errno)``."""

    def __init__(self, server: UsbdevfsServer, memory: Memory) -> None:
        self.server, self.memory = server, memory
        self.request = 0
        self.arg: FakeData | None = None
        self.result: tuple[int, int] | None = None
        self.connected = True

    def get_connected(self) -> bool:
        return self.connected

    def get_request(self) -> int:
        return self.request

    def get_arg(self) -> FakeData:
        assert self.arg is not None
        return self.arg

    def complete(self, result: int, error: int) -> None:
        self.get_arg().flush()
        self.result = (result, error)

    def ioctl(self, request: int, arg: int) -> tuple[int, int]:
        self.request, self.arg, self.result = request, FakeData(self.memory, 0, POINTER.pack(arg)), None
        self.server.handle(self)
        assert self.result is not None
        return self.result


def _server(*options: str) -> tuple[UsbdevfsServer, FakeClient]:
    board = served_board("MOCKUSB+AMD", list(options))
    server = UsbdevfsServer(board, describe_board(board.bridge, board.target))
    return server, FakeClient(server, Memory())


def _urb(memory: Memory, kind: int, endpoint: int, buffer: bytes) -> tuple[int, int]:
    """A struct usbdevfs_urb and its buffer in client memory: (URB address, buffer address)."""
    buffer_addr = memory.alloc(buffer)
    return memory.alloc(URB.pack(kind, endpoint, 0, 0, buffer_addr, len(buffer), 0, 0, 0, 0, 0, 0)), buffer_addr


def _reap(client: FakeClient, request: Request = Request.USBDEVFS_REAPURBNDELAY) -> tuple[tuple[int, int], int]:
    slot = client.memory.alloc(bytes(POINTER.size))
    result = client.ioctl(request, slot)
    return result, POINTER.unpack(client.memory.read(slot, POINTER.size))[0]


def _status(client: FakeClient, urb_addr: int) -> tuple[int, int]:
    fields = URB.unpack(client.memory.read(urb_addr, URB.size))
    return fields[2], fields[6]  # status, actual_length


def test_an_async_control_read_is_reaped_with_the_boards_bytes() -> None:
    server, client = _server("mode=timed")
    setup = struct.pack("<BBHHH", 0xC0, Vendor.XDATA_READ, Xdata.SRAM_WINDOW, 0, 4)
    urb_addr, buffer_addr = _urb(client.memory, UrbType.USBDEVFS_URB_TYPE_CONTROL, 0, setup + bytes(4))
    assert client.ioctl(Request.USBDEVFS_SUBMITURB, urb_addr) == (0, 0)
    assert server.bridge.kernel.now_ns == 0  # timed mode: nothing moves until the client waits
    assert _reap(client) == ((0, 0), urb_addr)
    assert _status(client, urb_addr) == (0, 4)
    assert client.memory.read(buffer_addr, 12)[8:] == server.bridge.read_xdata(Xdata.SRAM_WINDOW, 4)
    assert server.bridge.kernel.now_ns > 0


def test_a_discarded_urb_is_reaped_with_enoent_and_an_unknown_one_is_einval() -> None:
    _, client = _server()
    urb_addr, _ = _urb(client.memory, UrbType.USBDEVFS_URB_TYPE_BULK, BULK_OUT_EP, bytes(512))  # no arm: it NAKs
    assert client.ioctl(Request.USBDEVFS_SUBMITURB, urb_addr) == (0, 0)
    assert _reap(client)[0] == (-1, errno.EAGAIN)  # nothing completes in virtual time: still in flight
    assert _reap(client, Request.USBDEVFS_REAPURB)[0] == (-1, errno.EINTR)
    assert client.ioctl(Request.USBDEVFS_DISCARDURB, urb_addr) == (0, 0)
    assert _reap(client) == ((0, 0), urb_addr)
    assert _status(client, urb_addr) == (-STATUS_TO_ERRNO[UsbStatus.CANCELLED], 0)
    assert client.ioctl(Request.USBDEVFS_DISCARDURB, urb_addr) == (-1, errno.EINVAL)


def test_a_client_that_closed_leaves_no_transfer_on_the_board_once_another_opens() -> None:
    server, client = _server()
    urb_addr, _ = _urb(client.memory, UrbType.USBDEVFS_URB_TYPE_BULK, BULK_IN_EP, bytes(512))
    assert client.ioctl(Request.USBDEVFS_SUBMITURB, urb_addr) == (0, 0)
    assert server.bridge.front.busy == 1  # a bulk IN with no arm: it waits on the endpoint
    client.connected = False
    later = FakeClient(server, client.memory)
    assert later.ioctl(Request.USBDEVFS_GET_CAPABILITIES, _uint(later, 0)) == (0, 0)
    assert server.bridge.front.busy == 0 and list(server.clients) == [later]


BAD_URBS = [
    (UrbType.USBDEVFS_URB_TYPE_ISO, BULK_IN_EP, bytes(8), errno.EINVAL),
    (UrbType.USBDEVFS_URB_TYPE_INTERRUPT, BULK_IN_EP, bytes(8), errno.EINVAL),
    (UrbType.USBDEVFS_URB_TYPE_BULK, 0x05, bytes(8), errno.ENOENT),
    (UrbType.USBDEVFS_URB_TYPE_CONTROL, 0, bytes(4), errno.EINVAL),  # shorter than the setup packet
    (UrbType.USBDEVFS_URB_TYPE_CONTROL, 0, struct.pack("<BBHHH", 0xC0, 0xE4, 0, 0, 64), errno.EINVAL),  # wLength
]


@pytest.mark.parametrize(("kind", "endpoint", "buffer", "expected"), BAD_URBS)
def test_malformed_urbs_get_the_kernels_errno_and_change_nothing(kind: int, endpoint: int, buffer: bytes,
                                                                 expected: int) -> None:  # fmt: skip
    server, client = _server()
    digest = server.bridge.state_digest()
    urb_addr, _ = _urb(client.memory, kind, endpoint, buffer)
    assert client.ioctl(Request.USBDEVFS_SUBMITURB, urb_addr) == (-1, expected)
    assert server.bridge.state_digest() == digest


def _uint(client: FakeClient, value: int) -> int:
    return client.memory.alloc(UINT32.pack(value))


def test_device_and_interface_requests() -> None:
    server, client = _server()
    caps = _uint(client, 0)
    assert client.ioctl(Request.USBDEVFS_GET_CAPABILITIES, caps) == (0, 0)
    assert UINT32.unpack(client.memory.read(caps, 4))[0] == SERVED_CAPABILITIES
    assert client.ioctl(Request.USBDEVFS_CLAIMINTERFACE, _uint(client, 1)) == (-1, errno.ENOENT)
    assert client.ioctl(Request.USBDEVFS_RELEASEINTERFACE, _uint(client, 0)) == (-1, errno.EINVAL)
    assert client.ioctl(Request.USBDEVFS_CLAIMINTERFACE, _uint(client, 0)) == (0, 0)
    assert client.ioctl(Request.USBDEVFS_RELEASEINTERFACE, _uint(client, 0)) == (0, 0)
    assert client.ioctl(Request.USBDEVFS_ALLOC_STREAMS, _uint(client, 0)) == (-1, errno.EINVAL)
    assert client.ioctl(0x5599, 0) == (-1, errno.ENOTTY)  # a request the server does not serve
    server.bridge.front.halted.add(BULK_OUT_EP)
    assert client.ioctl(Request.USBDEVFS_CLEAR_HALT, _uint(client, BULK_OUT_EP)) == (0, 0)
    assert BULK_OUT_EP not in server.bridge.front.halted
    assert client.ioctl(Request.USBDEVFS_SETCONFIGURATION, _uint(client, 0)) == (0, 0)
    assert server.bridge.front.configuration == 0
    assert client.ioctl(Request.USBDEVFS_RESET, 0) == (0, 0)
    assert server.bridge.front.configuration == 1
    for interface, alt_setting, expected in (
        (0, 0, (0, 0)),
        (1, 0, (-1, errno.EINVAL)),
        (0, 1, (-1, STATUS_TO_ERRNO[UsbStatus.STALL])),
    ):  # no alt setting 1
        arg = client.memory.alloc(SETINTERFACE.pack(interface, alt_setting))
        assert client.ioctl(Request.USBDEVFS_SETINTERFACE, arg) == expected
    assert isinstance(server.clients[client], ClientState)


def test_synchronous_control_and_bulk_ioctls_use_their_own_timeouts() -> None:
    faults = '[{"operation": "control_in", "request": 228, "occurrence": 2, "fault": "stall"}]'
    server, client = _server(f"faults={faults}")
    data = client.memory.alloc(bytes(4))
    control = client.memory.alloc(CTRL_TRANSFER.pack(0xC0, Vendor.XDATA_READ, Xdata.LTSSM, 0, 4, 1000, data))
    assert client.ioctl(Request.USBDEVFS_CONTROL, control) == (4, 0)
    assert client.memory.read(data, 4) == server.bridge.read_xdata(Xdata.LTSSM, 4)
    assert client.ioctl(Request.USBDEVFS_CONTROL, control) == (-1, STATUS_TO_ERRNO[UsbStatus.STALL])
    timeout_ms = 10
    payload = client.memory.alloc(bytes(512))
    bulk = client.memory.alloc(BULK_TRANSFER.pack(BULK_OUT_EP, 512, timeout_ms, payload))  # no arm: it NAKs
    before = server.bridge.kernel.now_ns
    assert client.ioctl(Request.USBDEVFS_BULK, bulk) == (-1, STATUS_TO_ERRNO[UsbStatus.TIMED_OUT])
    assert server.bridge.kernel.now_ns - before == timeout_ms * _NS_PER_MS
    assert server.bridge.front.busy == 0
    forever = client.memory.alloc(BULK_TRANSFER.pack(BULK_OUT_EP, 512, 0xFFFFFFFF, payload))  # 49 days
    before = server.bridge.kernel.now_ns
    assert client.ioctl(Request.USBDEVFS_BULK, forever) == (-1, STATUS_TO_ERRNO[UsbStatus.TIMED_OUT])
    assert server.bridge.kernel.now_ns - before == WAIT_CAP_NS  # the emulator's longest wait


def test_a_babble_is_eoverflow_synchronously_and_on_a_reaped_urb() -> None:
    """The kernel copies a synchronous control read's data only when it succeeds; a reaped URB carries the
    overflow status and the bytes the data stage moved (docs/faults.md "Babble")."""
    rule = '{"operation": "control_in", "request": 228, "occurrence": %d, "fault": "babble"}'
    faults = f"[{rule % 1}, {rule % 2}]"
    server, client = _server(f"faults={faults}")
    data = client.memory.alloc(b"\xee" * 4)
    control = client.memory.alloc(CTRL_TRANSFER.pack(0xC0, Vendor.XDATA_READ, Xdata.LTSSM, 0, 4, 1000, data))
    assert client.ioctl(Request.USBDEVFS_CONTROL, control) == (-1, errno.EOVERFLOW)
    assert client.memory.read(data, 4) == b"\xee" * 4
    setup = struct.pack("<BBHHH", 0xC0, Vendor.XDATA_READ, Xdata.LTSSM, 0, 4)
    urb_addr, buffer_addr = _urb(client.memory, UrbType.USBDEVFS_URB_TYPE_CONTROL, 0, setup + bytes(4))
    assert client.ioctl(Request.USBDEVFS_SUBMITURB, urb_addr) == (0, 0)
    assert _reap(client) == ((0, 0), urb_addr)
    assert _status(client, urb_addr) == (-errno.EOVERFLOW, 4)
    assert client.memory.read(buffer_addr, 12)[8:] == server.bridge.read_xdata(Xdata.LTSSM, 4)
    assert client.ioctl(Request.USBDEVFS_CONTROL, control) == (4, 0)  # the third read has no fault


def test_get_descriptor_is_answered_from_the_descriptors() -> None:
    server, client = _server()
    data = client.memory.alloc(bytes(18))
    control = client.memory.alloc(CTRL_TRANSFER.pack(0x80, 0x06, 0x0100, 0, 18, 1000, data))
    assert client.ioctl(Request.USBDEVFS_CONTROL, control) == (18, 0)
    assert client.memory.read(data, 18) == server.descriptors.descriptors[:18]
    assert server.bridge.kernel.now_ns == 0

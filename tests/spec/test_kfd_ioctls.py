"""Request-number encoding and the ioctl table."""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.spec.kfd_ioctls import AMDKFD_IOCTL_BASE, IOCTLS, KfdIoctl
from tinyhil.spec.linux_ioctl import IocDir, ioc, ioc_dir, ioc_nr, ioc_size, ioc_type


@pytest.mark.parametrize(
    ("request_", "value"),
    [
        (KfdIoctl.AMDKFD_IOC_GET_VERSION, 0x80084B01),  # _IOR('K', 1, 8 bytes)
        (KfdIoctl.AMDKFD_IOC_CREATE_QUEUE, 0xC0584B02),  # _IOWR('K', 2, 88 bytes)
        (KfdIoctl.AMDKFD_IOC_ACQUIRE_VM, 0x40084B15),  # _IOW('K', 0x15, 8 bytes)
        (KfdIoctl.AMDKFD_IOC_WAIT_EVENTS, 0xC0184B0C),
        (KfdIoctl.AMDKFD_IOC_GET_PROCESS_APERTURES, 0x81904B06),  # 400-byte argument
    ],
)
def test_known_request_numbers(request_: KfdIoctl, value: int) -> None:
    assert int(request_) == value


@given(st.integers(0, 3), st.integers(0, 255), st.integers(0, 255), st.integers(0, (1 << 14) - 1))
def test_the_encoding_round_trips(direction: int, type_: int, nr: int, size: int) -> None:
    request = ioc(direction, type_, nr, size)
    assert (ioc_dir(request), ioc_type(request), ioc_nr(request), ioc_size(request)) == (direction, type_, nr, size)
    assert 0 <= request < 1 << 32


@pytest.mark.parametrize("definition", list(IOCTLS.values()), ids=lambda d: d.name)
def test_the_table_entry_encodes_its_structure(definition: object) -> None:
    request = definition.request  # type: ignore[attr-defined]
    assert ioc_type(request) == AMDKFD_IOCTL_BASE
    assert ioc_size(request) == ctypes.sizeof(definition.args)  # type: ignore[attr-defined]
    assert ioc_dir(request) in (IocDir.IOC_READ, IocDir.IOC_WRITE, IocDir.IOC_READ | IocDir.IOC_WRITE)
    assert IOCTLS[definition.nr] is definition  # type: ignore[attr-defined]


def test_every_request_is_in_the_table_once() -> None:
    assert sorted(IOCTLS) == sorted(ioc_nr(r) for r in KfdIoctl) == list(range(0x01, 0x24))

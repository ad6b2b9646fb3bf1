"""The memory protocol as a state machine: the reference client drives MOCKKFD over two fake GPUs, with invariants
tying the client's view, MOCKKFD's bookkeeping and what each GPU actually maps together."""

from __future__ import annotations

import ctypes
import errno
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tinyhil.emulators.kernel import EventKernel
from tinyhil.kfd import KFD, Allocation, MemoryDomain
from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_memory import (
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_map_memory_to_gpu_args,
)

VRAM_BYTES = 1 << 20


@pytest.fixture
def machine_class(helpers: Any) -> type[RuleBasedStateMachine]:
    fake = helpers.load_fake_gpu()

    class MemoryMachine(RuleBasedStateMachine):
        allocations = Bundle("allocations")

        def __init__(self) -> None:
            super().__init__()
            kernel = EventKernel()
            self.fakes = [fake.FakeGpu(kernel, vram_bytes=VRAM_BYTES),
                          fake.FakeGpu(kernel, gfx_target_version=90500, vram_bytes=VRAM_BYTES)]  # fmt: skip
            self.mock = MockKFD(self.fakes)
            self.kfd = KFD(self.mock.fileio)
            self.devices = [self.kfd.device(0), self.kfd.device(1)]
            self.contents: dict[int, bytes] = {}

        def teardown(self) -> None:
            self.kfd.close()
            self.mock.close()

        @rule(
            target=allocations,
            domain=st.sampled_from(MemoryDomain),
            pages=st.integers(1, 64),
            owner=st.integers(0, 1),
            peers=st.sets(st.integers(0, 1)),
        )
        def alloc(self, domain: MemoryDomain, pages: int, owner: int, peers: set[int]) -> Any:
            device = self.devices[owner]
            try:
                allocation = device.alloc(
                    pages * PAGE_BYTES, domain, map_to=[self.devices[i] for i in sorted(peers | {owner})]
                )
            except OSError as exc:
                assert exc.errno == errno.ENOMEM and domain is MemoryDomain.VRAM
                return None
            self.contents[id(allocation)] = bytes(allocation.size)
            return allocation

        @rule(allocation=allocations, index=st.integers(0, 1))
        def map(self, allocation: Allocation | None, index: int) -> None:
            if allocation is not None and not allocation.freed:
                allocation.device.map(allocation, [self.devices[index]])

        @rule(allocation=allocations, index=st.integers(0, 1))
        def unmap(self, allocation: Allocation | None, index: int) -> None:
            if allocation is not None and not allocation.freed:
                allocation.device.unmap(allocation, [self.devices[index]])

        @rule(allocation=consumes(allocations))
        def free(self, allocation: Allocation | None) -> None:
            if allocation is not None:
                allocation.free()

        @rule(allocation=allocations, data=st.data())
        def write_then_read_on_every_gpu(self, allocation: Allocation | None, data: st.DataObject) -> None:
            if allocation is None or allocation.freed:
                return
            offset = data.draw(st.integers(0, allocation.size - 1))
            payload = data.draw(st.binary(min_size=1, max_size=min(256, allocation.size - offset)))
            allocation.write(offset, payload)
            for device in allocation.mapped_on:
                fake_gpu = self.fakes[self.devices.index(device)]
                assert bytes(fake_gpu.read(allocation.va + offset, len(payload))) == payload

        @precondition(lambda self: any(a.mapped_on for d in self.devices for a in d.allocations))
        @rule(data=st.data())
        def overlapping_map_is_refused_with_state_unchanged(self, data: st.DataObject) -> None:
            mapped = [a for d in self.devices for a in d.allocations if a.mapped_on]
            victim = data.draw(st.sampled_from(mapped))
            target = victim.mapped_on[0]
            va = victim.va + data.draw(st.integers(0, victim.size // PAGE_BYTES - 1)) * PAGE_BYTES
            args = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=PAGE_BYTES, gpu_id=target.gpu_id,
                                                           flags=int(MemoryDomain.GTT.value))  # fmt: skip
            self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
            before = self.mock.state_digest(), [f.state() for f in self.fakes]
            ids = (ctypes.c_uint32 * 1)(target.gpu_id)
            mapping = kfd_ioctl_map_memory_to_gpu_args(handle=args.handle, n_devices=1,
                                                            device_ids_array_ptr=ctypes.addressof(ids))  # fmt: skip
            with pytest.raises(OSError) as caught:
                self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_MAP_MEMORY_TO_GPU, mapping)
            assert caught.value.errno == errno.EINVAL and "overlaps" in str(caught.value)
            assert (self.mock.state_digest(), [f.state() for f in self.fakes]) == before
            self.kfd.ioctl(
                KfdIoctl.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd_ioctl_free_memory_of_gpu_args(handle=args.handle)
            )

        @invariant()
        def every_gpu_maps_exactly_what_the_client_mapped(self) -> None:
            for device, fake_gpu in zip(self.devices, self.fakes, strict=True):
                expected = sorted((a.va, a.size) for d in self.devices for a in d.allocations if device in a.mapped_on)
                assert sorted((va, len(view)) for va, view in fake_gpu.mappings.items()) == expected

        @invariant()
        def vram_accounting_matches_the_live_vram_buffers(self) -> None:
            for device, gpu in zip(self.devices, self.mock.gpus, strict=True):
                used = sum(a.size for a in device.allocations if a.domain is MemoryDomain.VRAM)
                assert gpu.vram.free_bytes == VRAM_BYTES - used

    return MemoryMachine


def test_the_memory_protocol(machine_class: type[RuleBasedStateMachine]) -> None:
    run_state_machine_as_test(machine_class, settings=settings(max_examples=40, stateful_step_count=25, deadline=None))

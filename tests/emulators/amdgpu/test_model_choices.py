"""The engine model's own queue status and error encoding: distinct flags and codes, none of them a hardware fact."""

from __future__ import annotations

from tinyhil.emulators.amdgpu import ErrorCode, QueueStatus


def test_the_status_bits_are_distinct_flags_and_the_codes_distinct_values() -> None:
    flags = [QueueStatus.IDLE, QueueStatus.HUNG, QueueStatus.PACKET_ERROR, QueueStatus.MEMORY_FAULT]
    assert flags == [1, 2, 4, 8]
    assert ErrorCode.NONE == 0 and len({int(code) for code in ErrorCode}) == len(ErrorCode)

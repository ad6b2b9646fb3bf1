"""The timing model: the preset's firmware figures and the charging arithmetic."""

from __future__ import annotations

import dataclasses

import pytest

from tinyhil.emulators.timing import TIMING_PRESETS, TimingModel
from tinyhil.errors import InvalidArgument


def test_preset_carries_the_firmware_figures() -> None:
    timing = TimingModel.preset("asm2464-usb3")
    assert timing is TIMING_PRESETS["asm2464-usb3"]
    assert (timing.bulk_out_bytes_per_s, timing.bulk_in_bytes_per_s) == (381_000_000, 700_000_000)
    assert 1_000_000 <= timing.stream_bytes_per_s <= 10_000_000 and timing.stream_packet_bytes == 1024


def test_charges() -> None:
    timing = TimingModel.preset("asm2464-usb3")
    window = 0x40000
    assert timing.bulk_out_ns(window) == timing.bulk_setup_ns + -(-window * 10**9 // 381_000_000)
    assert window / (timing.bulk_out_ns(window) - timing.bulk_setup_ns) * 1e3 == pytest.approx(381, rel=1e-3)
    assert timing.bulk_in_ns(0) == timing.bulk_setup_ns and timing.control_ns() == timing.control_service_ns
    assert timing.control_round_trip_ns() == timing.usb_latency_ns + timing.control_service_ns
    assert timing.stream_ns(1) == timing.stream_ns(1024), "a partial packet costs a whole one"
    assert timing.stream_packets_done(timing.stream_ns(4096)) == 4 and timing.stream_packets_done(0) == 0
    fast = dataclasses.replace(timing, gpu_copy_bytes_per_s=4_000_000_000)
    assert fast.gpu_copy_ns(4_000) == 1_000 and fast.gpu_copy_ns(4_001) == 1_001, "whole ns, rounded up"


def test_bad_parameters() -> None:
    timing = TimingModel.preset("asm2464-usb3")
    with pytest.raises(InvalidArgument, match="bulk_out_bytes_per_s"):
        dataclasses.replace(timing, bulk_out_bytes_per_s=0)
    with pytest.raises(InvalidArgument, match="usb_latency_ns"):
        dataclasses.replace(timing, usb_latency_ns=-1)
    with pytest.raises(InvalidArgument, match="expected one of"):
        TimingModel.preset("usb4")

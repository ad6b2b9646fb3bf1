"""PCIe models: configuration spaces, the bridge chain behind the ASM2464, the endpoint protocol, a plain endpoint."""

from __future__ import annotations

from tinyhil.emulators.pcie.config import ConfigSpace
from tinyhil.emulators.pcie.endpoint import DEFAULT_VRAM_BYTES, PlainEndpoint
from tinyhil.emulators.pcie.function import PcieFunction, PcieHost, PcieUnsupportedRequest
from tinyhil.emulators.pcie.topology import ConfigTarget, PcieTopology
from tinyhil.emulators.pcie.type0 import BarSpec, Type0Config
from tinyhil.emulators.pcie.type1 import Type1Config

__all__ = [
    "DEFAULT_VRAM_BYTES",
    "BarSpec",
    "ConfigSpace",
    "ConfigTarget",
    "PcieFunction",
    "PcieHost",
    "PcieTopology",
    "PcieUnsupportedRequest",
    "PlainEndpoint",
    "Type0Config",
    "Type1Config",
]

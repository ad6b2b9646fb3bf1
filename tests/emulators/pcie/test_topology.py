"""The PCIe topology behind the bridge: routing generations."""

from __future__ import annotations

from tinyhil.emulators.asm2464 import Asm2464


def test_each_topology_owns_its_routing_generation() -> None:
    """Two boards in one process: reprogramming one's config spaces never invalidates the other's routing caches."""
    first, second = Asm2464(), Asm2464()
    before = (first.topology.generation[0], second.topology.generation[0])
    first.topology.bridges[0].write(0x18, 0x0201_00, 4)  # primary/secondary/subordinate bus numbers
    first.function.config.write(0x04, 0x0006, 2)  # COMMAND: memory + bus master
    assert first.topology.generation[0] > before[0]
    assert second.topology.generation[0] == before[1]
    assert first.function.config.generation is first.topology.generation, "the endpoint joins its topology's cell"
    assert all(bridge.generation is second.topology.generation for bridge in second.topology.bridges)

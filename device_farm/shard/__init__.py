"""A shard: one pytest process over some pairs of one lane.

Its parent side (:mod:`~tinyhil.device_farm.shard.parent`) starts it and reads its events; its pytest-plugin side
(:mod:`~tinyhil.device_farm.shard.plugin`, loaded in the shard with ``-p``) takes the board's lease, pins the
target and writes an event per test. On a served board it runs under ``tinyhil serve``
(:mod:`~tinyhil.device_farm.shard.served`).
"""

from __future__ import annotations

from tinyhil.device_farm.shard.parent import ShardExit, ShardJob, run_shard_process, shard_command

__all__ = ["ShardExit", "ShardJob", "run_shard_process", "shard_command"]

"""A shard: one pytest process that runs pairs of lanes, fed lane after lane or given its node ids.

Its parent side (:mod:`~tinyhil.device_farm.shard.parent`) starts it and reads its events; its pytest-plugin side
(:mod:`~tinyhil.device_farm.shard.plugin`, loaded in the shard with ``-p``) takes the board's lease, pins the
target and writes an event per test; :mod:`~tinyhil.device_farm.shard.feed` is how a shard is fed its tests,
:mod:`~tinyhil.device_farm.shard.watchdog` how a test over its time limit is stopped. On a served board it runs
under ``tinyhil serve`` (:mod:`~tinyhil.device_farm.shard.served`).
"""

from __future__ import annotations

from tinyhil.device_farm.shard.parent import ShardExit, ShardJob, ShardProcess, run_shard_process, shard_command

__all__ = ["ShardExit", "ShardJob", "ShardProcess", "run_shard_process", "shard_command"]

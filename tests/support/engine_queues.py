"""What any ring leaves an engine-model queue in (``tests/emulators/amdgpu``'s random and fuzzed rings)."""

from __future__ import annotations

import pytest

from tinyhil.emulators.amdgpu import GpuQueueError, Queue
from tinyhil.emulators.amdgpu.model_choices import ErrorCode


def check_queue_outcome(queue: Queue) -> None:
    """A stopped queue carries an error code and a message naming it, and raises it on ``check()``; any other queue
    is idle, waiting on a poll, or waiting for the rest of a packet, and ``check()`` passes."""
    if queue.stopped:
        assert queue.error_code != ErrorCode.NONE and queue.error_message.startswith(queue.name + ": ")
        with pytest.raises(GpuQueueError):
            queue.check()
    else:
        assert queue.idle or queue.waiting or "waiting for the rest" in queue.describe(), queue.describe()
        queue.check()

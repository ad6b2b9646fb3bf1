"""A pytest plugin (``-p fork_each_test``) that runs each test in a fork of the session's process.

Under ``tinyhil serve kfd`` each test then has a KFD process of its own, and the session's process never opens one:
each child's KFD client opens its session afresh (tinyhil.kfd.session). The child runs the test's setup, call and
teardown and sends its reports back; the session reports them as its own.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    hook = item.config.hook
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        reports = runtestprotocol(item, log=False, nextitem=None)
        data = [hook.pytest_report_to_serializable(config=item.config, report=report) for report in reports]
        with os.fdopen(write, "w") as pipe:
            json.dump(data, pipe)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data: list[dict[str, Any]] = json.load(pipe)
    os.waitpid(child, 0)
    for entry in data:
        report = hook.pytest_report_from_serializable(config=item.config, data=entry)
        if isinstance(report.longrepr, list):  # a skip's (path, line, reason): JSON made the tuple a list
            report.longrepr = tuple(report.longrepr)
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True

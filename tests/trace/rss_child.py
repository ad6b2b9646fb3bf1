"""Run ``tinyhil ARGV...`` in this process and print its exit status and peak RSS as JSON (for the memory tests).

``python rss_child.py trace drift FILE`` prints ``{"status": 2, "rss_bytes": ...}`` after the command's own
output; the peak is this process image's own ``VmHWM`` (``/proc/self/status``), measured in the child so that nothing
the test process did counts (``ru_maxrss`` would not do: Linux carries the forking parent's peak across fork and exec).
"""

from __future__ import annotations

import json
import re
import sys

from tinyhil.cli import main

if __name__ == "__main__":
    status = main(sys.argv[1:])
    with open("/proc/self/status") as status_file:
        found = re.search(r"VmHWM:\s+(\d+) kB", status_file.read())
    assert found is not None, "no VmHWM in /proc/self/status"
    rss = int(found.group(1)) * 1024
    print(json.dumps({"status": status, "rss_bytes": rss}))

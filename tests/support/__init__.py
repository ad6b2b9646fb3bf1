"""Shared test support, importable from every test because pyproject.toml puts ``tests`` on pytest's path.

- ``support.scripted_usb``: a scripted stand-in for ``usb1``'s handle, transfer and context.
- ``support.wire``: a recorder around the usb1 handle a ``Usb3Transport`` drives (MockUSB3's emulated one).
- ``support.boards``: a fresh emulated bridge and GPU brought up over USB, for the copyin/copyout tests.
- ``support.hosts``: fake sysfs/procfs host trees for the farm's discovery tests.
- ``support.outcome_suite``: a suite with a test of every outcome, and what each must be reported as.
- ``support.engine_queues``: ``check_queue_outcome``, what any ring leaves an engine-model queue in.
- ``support.firmware``: ``REAL_FIRMWARE``, the mark of a test that needs the gfx1100 firmware files.
- ``support.host_kernels``: C kernels the emulated GPUs' host-native executor runs (``VADD_C``).
- ``support.registries``: ``registry_of`` (a registry of the given targets alone) and ``null_opener``.
- ``support.usage_errors``: ``assert_one_usage_error``, how a pytest run refuses a bad option.
- ``support.system_bus``: ``FakePcie``, memory on the PCIe side of an emulated GPU (the bridge's SRAM by default).
- ``support.scripts``: the one loader of files that are scripts, not modules (``load_benchmark``, ``load_script``).

Nothing here is collected: the modules hold no tests.
"""

"""A gfx1100 vector add, compiled by LLVM, dispatched by tinyhil's KFD client over the real file seam.

Run under ``tinyhil serve kfd``: the code object runs on the served GPU's RDNA3 wave executor. Prints ``equal True``
when the GPU's sums equal numpy's.
"""

from __future__ import annotations

import numpy as np

from tinyhil.compiler_amdgpu import amd_compiler
from tinyhil.fileio import RealFileIO
from tinyhil.kfd.over_kfd import KfdAmdDevice

# The suite's portable vector add (tinyhil/fixtures/suite/test_kernels.py), here without the pytest plugin.
SRC = """
TH_KERNEL(vector_add) {
    TH_PTR(0, const th_f32, a);
    TH_PTR(1, const th_f32, b);
    TH_PTR(2, th_f32, c);
    TH_VAL(3, th_u64, n);
    TH_THREADS {
        th_u64 i = TH_GLOBAL_ID(0);
        if (i < n) c[i] = a[i] + b[i];
    }
}
"""
n = 1000
compiler = amd_compiler("KFD+AMD", "LLVM", "gfx1100")
dev = KfdAmdDevice.open("KFD+AMD:LLVM:gfx1100", RealFileIO(), compiler=compiler, capabilities={"compile", "exec"})
rng = np.random.default_rng(1)
a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
bufs = []
for x in (a, b):
    buf = dev.alloc(x.nbytes)
    dev.copyin(buf, x)
    bufs.append(buf)
out = dev.alloc(a.nbytes)
program = dev.compile(SRC, "vector_add")
dev.exec(program, -(-n // 64), 64, [*bufs, out, n])
result = np.frombuffer(dev.copyout(out), np.float32)
print("equal", bool(np.array_equal(result, a + b)))
dev.close()

"""Host-native kernels for the emulated GPUs' executor, as C the host compiler builds (docs/amdgpu.md, "Kernel
executor"): each takes the kernel-argument pointer, the workgroup id and the workgroup size."""

from __future__ import annotations

# out[i] = a[i] + b[i] for i < n; args: out, a, b (float pointers), n
VADD_C = b"""
#include <stdint.h>
void vadd(uint64_t *args, const uint32_t group_id[3], const uint32_t group_size[3]) {
    float *out = (float *)args[0];
    const float *a = (const float *)args[1], *b = (const float *)args[2];
    uint64_t n = args[3];
    for (uint32_t t = 0; t < group_size[0]; t++) {
        uint64_t i = (uint64_t)group_id[0] * group_size[0] + t;
        if (i < n) out[i] = a[i] + b[i];
    }
}
"""

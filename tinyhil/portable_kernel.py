"""The portable kernel form: one C source that builds as host C or OpenCL C for the emulated GPUs, and as CUDA C.

A portable kernel is written against the macros of :data:`PORTABLE_HEADER`: ``TH_KERNEL(name)`` opens it,
``TH_PTR(i, type, name)`` and ``TH_VAL(i, type, name)`` name its arguments, ``TH_THREADS { ... }`` is the body each
thread runs, ``TH_GLOBAL_ID(d)`` its id (``docs/kernels.md`` is the guide, with examples; the portable suite's
kernels are written in it).

Both builds see the same arguments: ``Device.exec``'s ``args`` as 64-bit words, argument ``i`` in ``TH_ARGV(i)``
(a buffer is its device address, an int its two's-complement value).

- **Host C** (``tinyhil.compiler.HostCCompiler``, run by the host-native executor of
  ``emulators/amdgpu/executor.py``): ``TH_KERNEL(name)`` is the executor's entry point
  ``void name(unsigned long long *args, const unsigned *group_id, const unsigned *group_size)``, called once per
  workgroup; ``TH_THREADS`` loops over the workgroup's threads (x fastest), so its body runs once per thread.
- **OpenCL C** (``tinyhil.compiler_amdgpu.AmdgpuCompiler``, the ``LLVM`` renderer: gfx1100 machine code for the
  RDNA3 wave executor): ``TH_KERNEL(name)`` is ``__kernel void name(const th_args a)``, the same block as CUDA's,
  ids from the amdgcn builtins, ``TH_PTR`` a ``__global`` pointer; ``TH_THREADS`` runs its body once.
- **CUDA C** (NVRTC, ``tinyhil.nv.nvrtc``): ``TH_KERNEL(name)`` is ``extern "C" __global__ void name(const th_args
  a)`` (one parameter: :data:`TH_MAX_ARGS` 64-bit words, :data:`TH_ARGS_BYTES` bytes, by value), and
  ``TH_THREADS`` runs its body once, for the calling thread.

NVRTC has no standard headers, so the header defines its own integer types (``th_u8`` .. ``th_u64``, ``th_i8`` ..
``th_i64``, ``th_f32``, ``th_f64``); ids are 32-bit and ``TH_GLOBAL_ID`` widens to 64 bits before it multiplies.
Inside ``TH_THREADS`` a thread ends early with ``continue`` (never ``return``, which on the host would end the
whole workgroup). There is no barrier and no shared memory: the host build runs a workgroup's threads one after
another.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PORTABLE_HEADER", "TH_ARGS_BYTES", "TH_MAX_ARGS", "with_portable_header"]

TH_MAX_ARGS: Final = 32  # arguments one launch passes: the kernel parameter's 64-bit words
TH_ARGS_BYTES: Final = TH_MAX_ARGS * 8  # the CUDA build's one kernel parameter, in bytes

PORTABLE_HEADER: Final = f"""\
/* tinyhil portable kernel header (docs/kernels.md): the same source builds as host C, OpenCL C and CUDA C. */
#ifndef TINYHIL_PORTABLE_KERNEL
#define TINYHIL_PORTABLE_KERNEL 1
typedef unsigned char th_u8;
typedef signed char th_i8;
typedef unsigned short th_u16;
typedef short th_i16;
typedef unsigned int th_u32;
typedef int th_i32;
#if defined(__OPENCL_C_VERSION__)
typedef unsigned long th_u64;
typedef long th_i64;
#else
typedef unsigned long long th_u64;
typedef long long th_i64;
#endif
typedef float th_f32;
typedef double th_f64;
#define TH_MAX_ARGS {TH_MAX_ARGS}
#if defined(__OPENCL_C_VERSION__) && defined(__AMDGCN__)
typedef struct {{ th_u64 v[TH_MAX_ARGS]; }} th_args;
#define TH_KERNEL(name) \\
    __kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void name(const th_args th_args_)
#define TH_ARGV(i) (th_args_.v[i])
#define TH_RESTRICT restrict
#define TH_THREADS for (int th_once_ = 0; th_once_ < 1; th_once_++)
#define TH_LOCAL_ID(d) ((th_u32)((d) == 0 ? __builtin_amdgcn_workitem_id_x() \\
    : (d) == 1 ? __builtin_amdgcn_workitem_id_y() : __builtin_amdgcn_workitem_id_z()))
#define TH_GROUP_ID(d) ((th_u32)((d) == 0 ? __builtin_amdgcn_workgroup_id_x() \\
    : (d) == 1 ? __builtin_amdgcn_workgroup_id_y() : __builtin_amdgcn_workgroup_id_z()))
#define TH_GROUP_SIZE(d) ((th_u32)((d) == 0 ? __builtin_amdgcn_workgroup_size_x() \\
    : (d) == 1 ? __builtin_amdgcn_workgroup_size_y() : __builtin_amdgcn_workgroup_size_z()))
#define TH_FUNCTION static inline
#define TH_GLOBAL __global
#elif defined(__CUDACC__)
typedef struct {{ th_u64 v[TH_MAX_ARGS]; }} th_args;
#define TH_KERNEL(name) extern "C" __global__ void name(const th_args th_args_)
#define TH_ARGV(i) (th_args_.v[i])
#define TH_RESTRICT __restrict__
#define TH_THREADS for (int th_once_ = 0; th_once_ < 1; th_once_++)
#define TH_LOCAL_ID(d) ((th_u32)((d) == 0 ? threadIdx.x : (d) == 1 ? threadIdx.y : threadIdx.z))
#define TH_GROUP_ID(d) ((th_u32)((d) == 0 ? blockIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z))
#define TH_GROUP_SIZE(d) ((th_u32)((d) == 0 ? blockDim.x : (d) == 1 ? blockDim.y : blockDim.z))
#define TH_FUNCTION __device__ static inline
#else
#define TH_KERNEL(name) \\
    void name(const th_u64 *th_args_, const th_u32 *th_group_id_, const th_u32 *th_group_size_)
#define TH_ARGV(i) (th_args_[i])
#define TH_RESTRICT restrict
#define TH_THREADS \\
    for (th_u32 th_lz_ = 0; th_lz_ < th_group_size_[2]; th_lz_++) \\
        for (th_u32 th_ly_ = 0; th_ly_ < th_group_size_[1]; th_ly_++) \\
            for (th_u32 th_lx_ = 0; th_lx_ < th_group_size_[0]; th_lx_++)
#define TH_LOCAL_ID(d) ((d) == 0 ? th_lx_ : (d) == 1 ? th_ly_ : th_lz_)
#define TH_GROUP_ID(d) (th_group_id_[d])
#define TH_GROUP_SIZE(d) (th_group_size_[d])
#define TH_FUNCTION static inline
#endif
#define TH_GLOBAL_ID(d) ((th_u64)TH_GROUP_ID(d) * TH_GROUP_SIZE(d) + TH_LOCAL_ID(d))
#ifndef TH_GLOBAL
#define TH_GLOBAL
#endif
#define TH_PTR(i, type, name) TH_GLOBAL type *TH_RESTRICT name = (TH_GLOBAL type *)TH_ARGV(i)
#define TH_VAL(i, type, name) const type name = (type)TH_ARGV(i)
#endif
"""
_LINE_RESET: Final = b"#line 1\n"  # compiler messages count the caller's lines, not the header's


def with_portable_header(source: bytes) -> bytes:
    """``source`` with :data:`PORTABLE_HEADER` in front (guarded, so a source that already has it is unchanged in
    meaning); a compiler's line numbers still count from the first line of ``source``."""
    return PORTABLE_HEADER.encode() + _LINE_RESET + source

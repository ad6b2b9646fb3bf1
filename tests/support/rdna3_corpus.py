"""The OpenCL C kernel corpus the RDNA3 tests build with clang-19 -O2 (explicit arguments, LDS, barriers, atomics),
and the numpy references that need more than one line."""

from __future__ import annotations

import numpy as np

SOURCE = """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
static inline int gid(void) {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
}
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, int n) {
  int i = gid(); if (i < n) c[i] = a[i] + b[i]; }
__kernel void saxpy(float alpha, __global const float *x, __global float *y, int n) {
  int i = gid(); if (i < n) y[i] = alpha * x[i] + y[i]; }
__kernel void divloop(__global const int *a, __global int *out) {
  int i = gid(); int v = a[i]; int acc = 0;
  for (int k = 0; k < (v & 15); k++) { if (k & 1) acc += k * v; else acc ^= k; }
  out[i] = acc; }
__kernel void reduce(__global const float *a, __global float *out) {
  __local float tile[256];
  int t = __builtin_amdgcn_workitem_id_x();
  tile[t] = a[gid()];
  for (int s = 128; s > 0; s >>= 1) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    if (t < s) tile[t] += tile[t + s];
  }
  if (t == 0) out[__builtin_amdgcn_workgroup_id_x()] = tile[0];
}
__kernel void histogram(__global const int *a, __global int *out) {
  __local int bins[16];
  int t = __builtin_amdgcn_workitem_id_x();
  if (t < 16) bins[t] = 0;
  __builtin_amdgcn_s_barrier();
  __atomic_fetch_add(&bins[a[gid()] & 15], 1, __ATOMIC_RELAXED);
  __builtin_amdgcn_s_barrier();
  if (t < 16) out[__builtin_amdgcn_workgroup_id_x() * 16 + t] = bins[t];
}
__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n) {
  __local float ta[16][16], tb[16][16];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int row = __builtin_amdgcn_workgroup_id_y() * 16 + ty, col = __builtin_amdgcn_workgroup_id_x() * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 16) {
    ta[ty][tx] = a[row * n + k0 + tx];
    tb[ty][tx] = b[(k0 + ty) * n + col];
    __builtin_amdgcn_s_barrier();
    for (int k = 0; k < 16; k++) acc += ta[ty][k] * tb[k][tx];
    __builtin_amdgcn_s_barrier();
  }
  c[row * n + col] = acc;
}
__kernel void scan(__global const int *a, __global int *out) {
  __local int buf[64];
  int t = __builtin_amdgcn_workitem_id_x();
  buf[t] = a[t];
  for (int off = 1; off < 64; off <<= 1) {
    __builtin_amdgcn_s_barrier();
    int v = t >= off ? buf[t - off] : 0;
    __builtin_amdgcn_s_barrier();
    buf[t] += v;
  }
  __builtin_amdgcn_s_barrier();
  out[t] = buf[t];
}
__kernel void ghist(__global const int *a, __global int *bins, __global int *firsts) {
  int i = gid(); int v = a[i];
  __atomic_fetch_add(&bins[v & 63], 1, __ATOMIC_RELAXED);
  __atomic_fetch_max(&firsts[v & 7], v, __ATOMIC_RELAXED); }
__kernel void privsum(__global const int *a, __global int *out) {
  int t = gid(); int arr[32];
  for (int k = 0; k < 32; k++) arr[k] = a[t * 32 + k] * k;
  int s = 0;
  for (int k = 0; k < 32; k++) s += arr[(k * 7 + a[t * 32]) & 31] ^ k;
  out[t] = s; }
__kernel void pkfma(__global const half2 *a, __global const half2 *b, __global half2 *c) {
  int i = gid(); c[i] = a[i] * b[i] + a[i]; }
__kernel void convert(__global const float *a, __global half *h, __global float *back, __global double *d) {
  int i = gid(); half x = (half)a[i]; h[i] = x; back[i] = (float)x + 1.0f;
  d[i] = (double)a[i] * 3.0 + (double)i; }
__kernel void fdiv(__global const float *a, __global const float *b, __global float *c) {
  int i = gid(); c[i] = a[i] / b[i]; }
__kernel void idiv(__global const int *a, __global const int *b, __global int *c) {
  int i = gid(); c[i] = a[i] / b[i] + a[i] % b[i]; }
__kernel void fmath(__global const float *a, __global float *c) {
  int i = gid(); float x = a[i];
  c[i] = __builtin_sqrtf(__builtin_fabsf(x)) + __builtin_expf(x * 0.01f) + __builtin_logf(__builtin_fabsf(x) + 1.0f); }
__kernel void spin(__global int *out, int n) {
  int i = gid(); while (out[0] != n) { out[1] += i; } }
"""


def divloop_reference(a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    for k in range(15):
        live = (a & 15) > k
        out = np.where(live, (out + k * a) if k & 1 else (out ^ k), out)
    return out


def privsum_reference(a: np.ndarray) -> np.ndarray:
    """``privsum``'s output for ``a`` of shape (threads, 32)."""
    arr = a * np.arange(32)
    k = np.arange(32)
    picks = (k * 7 + a[:, :1]) & 31
    return np.asarray((np.take_along_axis(arr, picks, axis=1) ^ k).sum(axis=1))

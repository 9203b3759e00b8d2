"""Zins's two use cases on an OpenCL device, with pyopencl (run under the stratoscope layer).

    strato record --opencl -o prof -- python examples/opencl/usecases.py
    # or, without `strato record`:
    STRATOSCOPE_OUT=prof OPENCL_LAYERS=target/debug/libstrato_opencl_layer.so \
        python examples/opencl/usecases.py

1. Memory management (Zins 4.5.5): a dataset copied host-to-device as many small copies vs one
   large copy, followed by the same square + reduce_sum kernels.
2. Compute-bound ranking (Zins 4.5.2): conv3x3 + relu + maxpool2x2 + matmul against the
   optimised strided conv3x3 + relu + matmul; the profile ranks kernels by device time.

Operations are annotated with `stratoscope.operation` when the package is installed (the layer
then attributes every device command to the operation that enqueued it); without it the script
still runs and the layer still records the OpenCL side.
"""
import contextlib
import json
import os
import sys
import time

import numpy as np
import pyopencl as cl

try:
    import stratoscope

    operation = stratoscope.operation
except ImportError:  # the layer still records the OpenCL side
    def operation(name):
        return contextlib.nullcontext()

SOURCE = """
__kernel void square(__global float* x) { size_t i = get_global_id(0); x[i] = x[i] * x[i]; }
__kernel void reduce_sum(__global const float* x, __global float* partial, uint n) {
    __local float tmp[64];
    size_t lid = get_local_id(0);
    float acc = 0.0f;
    for (size_t i = get_global_id(0); i < n; i += get_global_size(0)) acc += x[i];
    tmp[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] += tmp[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = tmp[0];
}
__kernel void conv3x3(__global const float* in, __constant float* w, __global float* out,
                      int W, int H, int stride) {
    int x = get_global_id(0), y = get_global_id(1);
    int OW = W / stride, OH = H / stride;
    if (x >= OW || y >= OH) return;
    float acc = 0.0f;
    for (int c = 0; c < 8; c++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            int ix = clamp(x * stride + dx, 0, W - 1), iy = clamp(y * stride + dy, 0, H - 1);
            acc += in[iy * W + ix] * w[c * 9 + (dy + 1) * 3 + (dx + 1)];
        }
    out[y * OW + x] = acc;
}
__kernel void relu(__global float* x) { size_t i = get_global_id(0); x[i] = fmax(x[i], 0.0f); }
__kernel void maxpool2x2(__global const float* in, __global float* out, int W, int H) {
    int x = get_global_id(0), y = get_global_id(1);
    int OW = W / 2;
    float a = in[(2 * y) * W + 2 * x], b = in[(2 * y) * W + 2 * x + 1];
    float c = in[(2 * y + 1) * W + 2 * x], d = in[(2 * y + 1) * W + 2 * x + 1];
    out[y * OW + x] = fmax(fmax(a, b), fmax(c, d));
}
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int N) {
    int r = get_global_id(1), c = get_global_id(0);
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[r * N + k] * B[k * N + c];
    C[r * N + c] = acc;
}
"""


def main():
    chunks = int(os.environ.get("CHUNKS", "256"))
    nbytes = int(os.environ.get("BYTES", str(4 << 20)))
    iters = int(os.environ.get("ITERS", "3"))
    ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
    queue = cl.CommandQueue(ctx)  # no profiling asked: the layer adds it
    prg = cl.Program(ctx, SOURCE).build()
    mf = cl.mem_flags
    out = {}

    # 1. Many small copies vs one large copy.
    floats = nbytes // 4
    host = (np.arange(floats) % 7).astype(np.float32)
    data = cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    partial = cl.Buffer(ctx, mf.READ_WRITE, 64 * 4)
    res = np.empty(64, dtype=np.float32)
    chunk = floats // chunks
    square = prg.square
    reduce_sum = prg.reduce_sum

    def compute():
        square(queue, (floats,), None, data)
        reduce_sum(queue, (64 * 64,), (64,), data, partial, np.uint32(floats))
        cl.enqueue_copy(queue, res, partial)
        return float(res.sum())

    with operation("warmup"):  # builds the kernels (PoCL compiles at first launch)
        compute()
    t_small = t_large = 0.0
    for _ in range(iters):
        t = time.perf_counter()
        with operation("many_small_copies"):
            for c in range(chunks):
                cl.enqueue_copy(queue, data, host[c * chunk:(c + 1) * chunk],
                                dst_offset=c * chunk * 4, is_blocking=False)
            s1 = compute()
        t_small += time.perf_counter() - t
        t = time.perf_counter()
        with operation("one_large_copy"):
            cl.enqueue_copy(queue, data, host, is_blocking=False)
            s2 = compute()
        t_large += time.perf_counter() - t
    out["copies"] = {"chunks": chunks, "bytes": nbytes, "iters": iters,
                     "many_small_ms": t_small * 1e3, "one_large_ms": t_large * 1e3,
                     "sums_equal": s1 == s2}

    # 2. Compute-bound step and its optimisation.
    W = H = 512
    N = 192
    inp = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.full(W * H, 0.5, np.float32))
    w = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.full(72, 0.1, np.float32))
    conv_out = cl.Buffer(ctx, mf.READ_WRITE, W * H * 4)
    pool_out = cl.Buffer(ctx, mf.READ_WRITE, W * H)
    a = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.full(N * N, 0.5, np.float32))
    b = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.full(N * N, 0.5, np.float32))
    c = cl.Buffer(ctx, mf.READ_WRITE, N * N * 4)
    conv, relu, pool, mm = prg.conv3x3, prg.relu, prg.maxpool2x2, prg.matmul
    with operation("warmup"):
        conv(queue, (W, H), None, inp, w, conv_out, np.int32(W), np.int32(H), np.int32(1))
        relu(queue, (W * H,), None, conv_out)
        pool(queue, (W // 2, H // 2), None, conv_out, pool_out, np.int32(W), np.int32(H))
        conv(queue, (W // 2, H // 2), None, inp, w, pool_out, np.int32(W), np.int32(H),
             np.int32(2))
        relu(queue, (W * H // 4,), None, pool_out)
        mm(queue, (N, N), None, a, b, c, np.int32(N))
        queue.finish()
    t_a = t_b = 0.0
    for _ in range(iters):
        t = time.perf_counter()
        with operation("conv_relu_maxpool_matmul"):
            conv(queue, (W, H), None, inp, w, conv_out, np.int32(W), np.int32(H), np.int32(1))
            relu(queue, (W * H,), None, conv_out)
            pool(queue, (W // 2, H // 2), None, conv_out, pool_out, np.int32(W), np.int32(H))
            mm(queue, (N, N), None, a, b, c, np.int32(N))
            queue.finish()
        t_a += time.perf_counter() - t
        t = time.perf_counter()
        with operation("strided_conv_relu_matmul"):
            conv(queue, (W // 2, H // 2), None, inp, w, pool_out, np.int32(W), np.int32(H),
                 np.int32(2))
            relu(queue, (W * H // 4,), None, pool_out)
            mm(queue, (N, N), None, a, b, c, np.int32(N))
            queue.finish()
        t_b += time.perf_counter() - t
    out["ranking"] = {"iters": iters, "conv_maxpool_ms": t_a * 1e3, "strided_conv_ms": t_b * 1e3}
    for buf in (data, partial, inp, w, conv_out, pool_out, a, b, c):
        buf.release()
    out["pid"] = os.getpid()
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a large, realistic, deterministic Kineto trace (PyTorch profiler JSON) for the memory
and time benchmarks (`benches/memory.py`).

The structure follows a real trace (`../shared/data/kineto/hta_df_index_resolver.json.gz`, a
V100 training step recorded by `torch.profiler`): top-level `schemaVersion`,
`deviceProperties`, `distributedInfo`; per training step a `ProfilerStep#N` user annotation on
the main thread holding nested `cpu_op`s (with `External id`, `Ev Idx`, `Sequence number`,
`Input Dims`/`Input type` args), `cuda_runtime` launches (`cudaLaunchKernel`,
`cudaMemcpyAsync`, `cudaMemsetAsync`, `cudaStreamSynchronize`) and their device ops on two CUDA
streams (`kernel` with occupancy args, `gpu_memcpy`, `gpu_memset` with bytes and bandwidth),
`ac2g` flows (`s` on the launch, `f` on the device op), `[memory]` instants with
`Total Allocated`, and process/thread name metadata. Timestamps are decimal microseconds with
three fractional digits (as recent Kineto writes them); the layout is Kineto's own (indented,
one event per block). Everything is drawn from `random.Random(seed)`: the same arguments give
the same bytes.

Usage: python3 benches/gen_kineto.py OUT.json --events N [--seed S] [--integer-numbers]
       (about 215 bytes per event: 7,200,000 events is about 1.55 GB)
"""
import argparse
import json
import random
import sys

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "volta_sgemm_128x64_tn",
    "volta_sgemm_64x64_nn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nt_align4>(cutlass_80_tensorop_"
    "s1688gemm_128x128_16x4_nt_align4::Params)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t"
    "<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::"
    "{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()"
    "(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)",
    "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>"
    "(float*, float const*, int, int, int)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
]
# (outer op, inner op, input dims, input types)
OPS = [
    ("aten::linear", "aten::addmm", "[[64, 1024], [1024, 1024], [1024]]", '["float", "float", "float"]'),
    ("aten::conv2d", "aten::cudnn_convolution", "[[32, 64, 56, 56], [64, 64, 3, 3]]", '["float", "float"]'),
    ("aten::add_", "aten::add_", "[[64, 1024], [64, 1024], []]", '["float", "float", "Scalar"]'),
    ("aten::sum", "aten::sum", "[[64, 1024], [], [], []]", '["float", "ScalarList", "Scalar", ""]'),
    ("aten::softmax", "aten::_softmax", "[[64, 1000], [], []]", '["float", "Scalar", "Scalar"]'),
    ("autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0", "[]", "[]"),
]
MAIN_PID, MAIN_TID, BWD_TID = 783658, 783658, 785244
DEVICE = 1
STREAMS = (7, 20)


INTEGER_NUMBERS = False


def ts(v_ns):
    """Nanoseconds -> decimal microseconds with three fractional digits (whole microseconds
    with --integer-numbers)."""
    if INTEGER_NUMBERS:
        return str(v_ns // 1000)
    return f"{v_ns // 1000}.{v_ns % 1000:03d}"


def frac(value):
    """A fractional arg value (bandwidth, blocks per SM), rounded with --integer-numbers."""
    return str(round(value)) if INTEGER_NUMBERS else f"{value:.6g}"


class Writer:
    def __init__(self, out):
        self.out = out
        self.first = True
        self.count = 0

    def raw(self, text):
        self.out.write(text)

    def event(self, text):
        self.out.write("\n  {\n    " if self.first else ",\n  {\n    ")
        self.out.write(text)
        self.out.write("\n  }")
        self.first = False
        self.count += 1


def header(w, seed):
    props = []
    for i in range(2):
        props.append(
            f'    {{\n      "id": {i}, "name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34089730048,\n'
            '      "computeMajor": 7, "computeMinor": 0,\n'
            '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
            '      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,\n'
            '      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 98304,\n'
            '      "numSms": 80, "sharedMemPerBlockOptin": 98304\n    }'
        )
    w.raw('\n{\n  "schemaVersion": 1,\n  "deviceProperties": [\n' + ",\n".join(props) + "\n  ],\n")
    w.raw('  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},\n')
    w.raw(f'  "profile_memory": 1,\n  "generator": {json.dumps(f"benches/gen_kineto.py seed {seed}")},\n')
    w.raw('  "traceEvents": [')


def generate(out, events, seed):
    rng = random.Random(seed)
    w = Writer(out)
    header(w, seed)
    t0 = 1669783687352244 * 1000
    for pid, tid, name in ((MAIN_PID, 0, "python3.8"),):
        w.event(f'"name": "process_name", "ph": "M", "ts": {ts(t0)}, "pid": {pid}, "tid": {tid},\n'
                f'    "args": {{"name": "{name}"}}')
    w.event(f'"name": "process_name", "ph": "M", "ts": {ts(t0)}, "pid": {DEVICE}, "tid": 0,\n'
            '    "args": {"name": "python3.8"}')
    for tid, name in ((MAIN_TID, "thread 783658 (python3.8)"), (BWD_TID, "thread 785244 (pt_autograd_0)")):
        w.event(f'"name": "thread_name", "ph": "M", "ts": {ts(t0)}, "pid": {MAIN_PID}, "tid": {tid},\n'
                f'    "args": {{"name": "{name}"}}')
    for s in STREAMS:
        w.event(f'"name": "thread_name", "ph": "M", "ts": {ts(t0)}, "pid": {DEVICE}, "tid": {s},\n'
                f'    "args": {{"name": "stream {s}"}}')
    cpu = t0 + 1000
    gpu_free = {s: cpu for s in STREAMS}
    ext = 3000
    corr = 70000
    ev_idx = 0
    seq = 1500
    allocated = 5_435_638_784
    step = 0
    while w.count < events:
        # One training step: the annotation is written first with its final duration, so its
        # body is generated into a buffer of event texts.
        body = []
        step_start = cpu
        cpu += rng.randint(5_000, 20_000)
        groups = rng.randint(40, 80)
        for _ in range(groups):
            outer, inner, dims, types = OPS[rng.randrange(len(OPS))]
            tid = BWD_TID if "Backward" in outer else MAIN_TID
            o_start = cpu
            i_start = o_start + rng.randint(2_000, 9_000)
            l_start = i_start + rng.randint(3_000, 12_000)
            l_dur = rng.randint(4_000, 30_000)
            i_end = l_start + l_dur + rng.randint(1_000, 5_000)
            o_end = i_end + rng.randint(1_000, 6_000)
            ext += 1
            corr += 1
            seq += 1
            body.append(
                f'"ph": "X", "cat": "cpu_op", "name": "{outer}", "pid": {MAIN_PID}, "tid": {tid},\n'
                f'    "ts": {ts(o_start)}, "dur": {ts(o_end - o_start)},\n'
                f'    "args": {{\n      "External id": {ext},"Ev Idx": {ev_idx}, "Fwd thread id": 0, '
                f'"Sequence number": {seq}, "Input Dims": {dims}, "Input type": {types}\n    }}')
            ev_idx += 1
            body.append(
                f'"ph": "X", "cat": "cpu_op", "name": "{inner}", "pid": {MAIN_PID}, "tid": {tid},\n'
                f'    "ts": {ts(i_start)}, "dur": {ts(i_end - i_start)},\n'
                f'    "args": {{\n      "External id": {ext + 1},"Ev Idx": {ev_idx}, "Fwd thread id": 0, '
                f'"Sequence number": {seq}, "Input Dims": {dims}, "Input type": {types}\n    }}')
            ev_idx += 1
            kind = rng.random()
            stream = STREAMS[0] if rng.random() < 0.85 else STREAMS[1]
            d_start = max(l_start + l_dur + rng.randint(1_000, 8_000), gpu_free[stream] + rng.randint(500, 3_000))
            if kind < 0.80:
                api, cbid = "cudaLaunchKernel", 211
                kname = KERNELS[rng.randrange(len(KERNELS))]
                d_dur = rng.randint(2_000, 400_000)
                grid = rng.choice(("[24, 1, 1]", "[128, 8, 1]", "[1024, 1, 1]", "[80, 2, 1]"))
                occupancy = rng.randint(1, 100)
                device_text = (
                    f'"ph": "X", "cat": "kernel", "name": {json.dumps(kname)}, "pid": {DEVICE}, "tid": {stream},\n'
                    f'    "ts": {ts(d_start)}, "dur": {ts(d_dur)},\n'
                    f'    "args": {{\n      "External id": {ext + 1}, "queued": 0, "device": {DEVICE}, '
                    f'"context": 1, "stream": {stream}, "correlation": {corr}, "registers per thread": '
                    f'{rng.choice((16, 32, 64, 128))}, "shared memory": {rng.choice((0, 4096, 49152))}, '
                    f'"blocks per SM": {frac(rng.randint(1, 400) / 10)}, "warps per SM": {frac(rng.randint(1, 640) / 10)}, '
                    f'"grid": {grid}, "block": [128, 1, 1], "est. achieved occupancy %": {occupancy}\n    }}')
            else:
                copy = kind < 0.93
                api, cbid = ("cudaMemcpyAsync", 41) if copy else ("cudaMemsetAsync", 51)
                nbytes = rng.choice((128, 4096, 1 << 20, 5_177_344, 16 << 20))
                d_dur = max(1_000, nbytes // 300)
                cat = "gpu_memcpy" if copy else "gpu_memset"
                dname = rng.choice(("Memcpy HtoD (Pageable -> Device)", "Memcpy DtoD (Device -> Device)",
                                    "Memcpy DtoH (Device -> Pinned)")) if copy else "Memset (Device)"
                device_text = (
                    f'"ph": "X", "cat": "{cat}", "name": "{dname}", "pid": {DEVICE}, "tid": {stream},\n'
                    f'    "ts": {ts(d_start)}, "dur": {ts(d_dur)},\n'
                    f'    "args": {{\n      "External id": {ext + 1}, "device": {DEVICE}, "context": 1, '
                    f'"stream": {stream}, "correlation": {corr}, "bytes": {nbytes}, '
                    f'"memory bandwidth (GB/s)": {frac(nbytes / d_dur)}\n    }}')
            body.append(
                f'"ph": "X", "cat": "cuda_runtime", "name": "{api}", "pid": {MAIN_PID}, "tid": {tid},\n'
                f'    "ts": {ts(l_start)}, "dur": {ts(l_dur)},\n'
                f'    "args": {{\n      "External id": {ext + 1}, "cbid": {cbid}, "correlation": {corr}\n    }}')
            body.append(
                f'"ph": "s", "id": {corr}, "pid": {MAIN_PID}, "tid": {tid}, "ts": {ts(l_start)}, '
                '"cat": "ac2g", "name": "ac2g"')
            body.append(device_text)
            body.append(
                f'"ph": "f", "id": {corr}, "pid": {DEVICE}, "tid": {stream}, "ts": {ts(d_start)}, '
                '"cat": "ac2g", "name": "ac2g", "bp": "e"')
            gpu_free[stream] = d_start + d_dur
            ext += 1
            if rng.random() < 0.3:
                nbytes = rng.choice((512, 4096, 5_242_880, 16 << 20))
                sign = 1 if rng.random() < 0.5 else -1
                allocated = max(0, allocated + sign * nbytes)
                body.append(
                    f'"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
                    f'    "pid": {MAIN_PID}, "tid": {tid}, "ts": {ts(i_start + 500)},\n'
                    f'    "args": {{\n      "Ev Idx": {ev_idx}, "Device Type": 1, "Device Id": {DEVICE}, '
                    f'"Addr": {139926520725504 + rng.randrange(1 << 30)}, "Bytes": {sign * nbytes}, '
                    f'"Total Allocated": {allocated}, "Total Reserved": 12782141440\n    }}')
                ev_idx += 1
            cpu = o_end + rng.randint(1_000, 10_000)
        # The step ends with a synchronize that waits for the device.
        sync_start = cpu
        cpu = max(cpu + 5_000, max(gpu_free.values()) + 2_000)
        corr += 1
        body.append(
            f'"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": {MAIN_PID}, '
            f'"tid": {MAIN_TID},\n    "ts": {ts(sync_start)}, "dur": {ts(cpu - sync_start)},\n'
            f'    "args": {{\n      "External id": {ext}, "cbid": 131, "correlation": {corr}\n    }}')
        w.event(
            f'"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": {MAIN_PID}, '
            f'"tid": {MAIN_TID},\n    "ts": {ts(step_start)}, "dur": {ts(cpu - step_start)},\n'
            f'    "args": {{\n      "External id": {ext}, "Ev Idx": {ev_idx}\n    }}')
        ev_idx += 1
        ext += 1
        for text in body:
            w.event(text)
        step += 1
        cpu += rng.randint(10_000, 50_000)
    w.event(
        f'"ph": "X", "cat": "Trace", "ts": {ts(t0)}, "dur": {ts(cpu - t0)}, "pid": "Spans", '
        '"tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}')
    w.raw('\n],\n  "traceName": "gen_kineto.json"\n}\n')
    return w.count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--events", type=int, required=True, help="at least this many events")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--integer-numbers", action="store_true",
                        help="whole-microsecond times and no fractional numbers (older Kineto "
                             "files; also avoids issue 11's split-at-'.' defect until it is fixed)")
    args = parser.parse_args()
    global INTEGER_NUMBERS
    INTEGER_NUMBERS = args.integer_numbers
    with open(args.out, "w", buffering=1 << 22) as out:
        n = generate(out, args.events, args.seed)
    print(n)


if __name__ == "__main__":
    sys.exit(main())

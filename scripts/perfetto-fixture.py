#!/usr/bin/env python3
"""Writes the Perfetto test traces of crates/strato-io/tests/data/perfetto/ with a second,
independent writer: the message classes Google publishes with Perfetto's protos (the `perfetto`
package on PyPI, `perfetto.protos.perfetto.trace.perfetto_trace_pb2`), not stratoscope's own.

    python -m pip install 'perfetto>=0.59'
    python scripts/perfetto-fixture.py crates/strato-io/tests/data/perfetto

`rocprofv3_like.pftrace` is laid out as rocprofv3's `--output-format pftrace` writes through the
Perfetto SDK (source/lib/output/generatePerfetto.cpp of ROCm/rocprofiler-sdk): one process
track, the main thread as a ThreadDescriptor track, other API threads as `THREAD n (tid)`
tracks, `COMPUTE AGENT [n] STREAM [s] (GPU)` and `COPY to AGENT [n] STREAM [s] (GPU)` tracks,
categories `hip_api`/`kernel_dispatch`/`memory_copy`/`marker_api`, a `corr_id` annotation and a
process-scoped flow per correlation id; timestamps on an incremental sequence-scoped clock
(id 64, as the SDK writes them) defined by a ClockSnapshot, names, categories and annotation
names interned. A second sequence writes absolute BOOTTIME timestamps and literal names, and a
counter track. The answer (what a reader must find) is written next to it as
`rocprofv3_like.expected.json`, computed here from what was written.
"""

import json
import random
import sys
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
BOOT0 = 5_000_000_000  # BOOTTIME at the clock snapshot
PID, MAIN_TID, OTHER_TID = 4242, 4242, 4300


def main(out_dir: Path) -> None:
    rng = random.Random(16)
    trace = pb.Trace()
    expected = {"spans": {}, "device_kernels": 0, "kernel_ns": 0, "copies": 0, "copy_ns": 0,
                "api_calls": 0, "correlated_kernels": 0, "counter_samples": 0, "instants": 0,
                "flows": 0, "kernel_queues": [], "threads": []}

    def add(seq=1, **fields):
        p = trace.packet.add()
        p.trusted_packet_sequence_id = seq
        for k, v in fields.items():
            if isinstance(v, int):
                setattr(p, k, v)
            else:
                getattr(p, k).CopyFrom(v)
        return p

    # Sequence 1: the SDK's layout.
    first = add(sequence_flags=CLEARED)
    first.first_packet_on_sequence = True
    first.trace_packet_defaults.timestamp_clock_id = 64
    first.trace_packet_defaults.track_event_defaults.track_uuid = 100
    c = first.clock_snapshot.clocks.add()
    c.clock_id, c.timestamp = 6, BOOT0
    c = first.clock_snapshot.clocks.add()
    c.clock_id, c.timestamp, c.is_incremental = 64, BOOT0, True

    tracks = [
        dict(uuid=1, process=dict(pid=PID, process_name="python")),
        dict(uuid=100, parent_uuid=1, thread=dict(pid=PID, tid=MAIN_TID, thread_name="python")),
        dict(uuid=200, parent_uuid=1, name=f"THREAD 1 ({OTHER_TID})"),
        dict(uuid=300, parent_uuid=1, name="COMPUTE AGENT [1] STREAM [0] (GPU)"),
        dict(uuid=301, parent_uuid=1, name="COMPUTE AGENT [1] STREAM [3] (GPU)"),
        dict(uuid=400, parent_uuid=1, name="COPY to AGENT [1] STREAM [0] (GPU)"),
    ]
    for t in tracks:
        p = add(sequence_flags=NEEDS)
        d = p.track_descriptor
        d.uuid = t["uuid"]
        if "parent_uuid" in t:
            d.parent_uuid = t["parent_uuid"]
        if "name" in t:
            d.name = t["name"]
        if "process" in t:
            d.process.pid = t["process"]["pid"]
            d.process.process_name = t["process"]["process_name"]
        if "thread" in t:
            d.thread.pid, d.thread.tid = t["thread"]["pid"], t["thread"]["tid"]
            d.thread.thread_name = t["thread"]["thread_name"]

    interned = {}  # (kind, text) -> iid
    last_ts = [BOOT0]

    def iid(p, kind, text):
        key = (kind, text)
        if key not in interned:
            interned[key] = len(interned) + 1
            entry = getattr(p.interned_data, kind).add()
            entry.iid, entry.name = interned[key], text
        return interned[key]

    def event(ts, typ, track=None, name=None, category=None, corr=None, flow=None):
        p = add(sequence_flags=NEEDS)
        p.timestamp = ts - last_ts[0]  # incremental clock 64
        last_ts[0] = ts
        e = p.track_event
        e.type = typ
        if track is not None:
            e.track_uuid = track
        if name is not None:
            e.name_iid = iid(p, "event_names", name)
        if category is not None:
            e.category_iids.append(iid(p, "event_categories", category))
        if corr is not None:
            a = e.debug_annotations.add()
            a.name_iid = iid(p, "debug_annotation_names", "corr_id")
            a.uint_value = corr
            a = e.debug_annotations.add()
            a.name_iid = iid(p, "debug_annotation_names", "kind")
            a.int_value = 11
        if flow is not None:
            e.flow_ids.append(flow)

    # Events in time order (the incremental clock needs it): API call, then its kernel or copy.
    items = []
    t = BOOT0 + 1000
    for corr in range(1, 41):
        tid_track = 100 if corr % 3 else 200
        api_len = rng.randrange(500, 5000)
        is_copy = corr % 5 == 0
        op_name = "hipMemcpyAsync" if is_copy else "hipLaunchKernel"
        items.append((t, "B", tid_track, op_name, "hip_api", corr))
        items.append((t + api_len, "E", tid_track, None, "hip_api", None))
        dev_start = t + api_len + rng.randrange(100, 3000)
        dev_len = rng.randrange(1000, 20000)
        if is_copy:
            items.append((dev_start, "B", 400, "MEMORY_COPY_HOST_TO_DEVICE", "memory_copy", corr))
            items.append((dev_start + dev_len, "E", 400, None, "memory_copy", None))
            expected["copies"] += 1
            expected["copy_ns"] += dev_len
        else:
            queue = 300 if corr % 2 else 301
            kname = rng.choice(["gemm_kernel", "relu_kernel", "softmax_kernel"])
            items.append((dev_start, "B", queue, kname, "kernel_dispatch", corr))
            items.append((dev_start + dev_len, "E", queue, None, "kernel_dispatch", None))
            expected["device_kernels"] += 1
            expected["kernel_ns"] += dev_len
            expected["correlated_kernels"] += 1
        expected["api_calls"] += 1
        expected["flows"] += 1
        t += api_len + rng.randrange(200, 2000)
    # A roctx range around everything on the main thread (default track: no track_uuid).
    items.append((BOOT0 + 500, "B", None, "train_step", "marker_api", None))
    items.append((t + 100_000, "E", None, None, "marker_api", None))
    # Stable order: by time, ends before begins at equal times.
    items.sort(key=lambda x: (x[0], x[1] == "B"))
    for ts, kind, track, name, cat, corr in items:
        typ = pb.TrackEvent.TYPE_SLICE_BEGIN if kind == "B" else pb.TrackEvent.TYPE_SLICE_END
        event(ts, typ, track, name, cat if kind == "B" else None, corr,
              flow=corr if kind == "B" and corr is not None else None)
    expected["spans"] = {"hip_api": expected["api_calls"], "kernel_dispatch":
                         expected["device_kernels"], "memory_copy": expected["copies"],
                         "marker_api": 1}
    expected["kernel_queues"] = [0, 3]
    expected["threads"] = sorted([MAIN_TID, OTHER_TID])
    expected["first_ts"] = BOOT0 + 500

    # Sequence 2: absolute BOOTTIME timestamps, literal names, a counter and an instant.
    p = add(seq=2, sequence_flags=CLEARED)
    d = p.track_descriptor
    d.uuid, d.parent_uuid, d.name = 500, 1, "GPU memory"
    d.counter.unit_name = "bytes"
    for i in range(7):
        p = add(seq=2, timestamp=BOOT0 + 10_000 * i)
        p.track_event.type = pb.TrackEvent.TYPE_COUNTER
        p.track_event.track_uuid = 500
        p.track_event.double_counter_value = float(1 << (20 + i))
        expected["counter_samples"] += 1
    p = add(seq=2, timestamp=BOOT0 + 77)
    p.track_event.type = pb.TrackEvent.TYPE_INSTANT
    p.track_event.track_uuid = 100
    p.track_event.name = "checkpoint"
    p.track_event.categories.append("marker_api")
    expected["instants"] += 1

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "rocprofv3_like.pftrace").write_bytes(trace.SerializeToString())
    (out_dir / "rocprofv3_like.expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "crates/strato-io/tests/data/perfetto"))

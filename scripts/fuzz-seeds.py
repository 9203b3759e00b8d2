#!/usr/bin/env python3
"""Regenerates the fuzz corpus (fuzz/corpus/<target>/) from the real traces in ../shared/data.

Seeds are small slices of real files, so the fuzzer spends its time on structure rather than on
bulk (and the committed corpus stays a few hundred KB):

- chrome: small Kineto files whole (one kept gzip-compressed), bigger ones cut to a window of
  events around the middle of their time span (CPU ops, runtime calls, kernels and their flows
  overlap there) plus all metadata events, at most --max-bytes each;
- tf: windows of the TensorFlow trace viewer JSON;
- xplane: XSpace protobufs with each line cut to its first events (wire-format rewrite: keeps
  planes, metadata maps and stats);
- nsys: the Nsight Systems export with each event table cut to its first rows (kernels keep
  their runtime calls), unreferenced strings dropped, 512-byte pages;
- ncu: the Nsight Compute CSV whole and cut to its first rows.
- rocprof: the rocprofv3 JSON cut to its first kernel dispatches, and the same with HIP API
  calls, a marker and memory copies added to the documented schema;
- perfetto: the rocprofv3-layout test trace of crates/strato-io/tests/data/perfetto/ (and, from
  scripts/fuzz.sh seeds, a Kineto seed exported by stratoscope's Perfetto exporter).
- perf_data, perf_script: ../shared/data holds no perf files, so these are recorded here with
  the real `perf` tool (root or perf_event_paranoid <= 1; skipped with a message when `perf` is
  missing): tiny workloads under tracepoints (sched, raw and named system calls), switch events
  with page faults, CPU samples with call chains; the text seeds are `perf script` of the same
  files in several layouts (--header --ns --show-task-events, default with call stacks, -F
  field lists, -G, --show-switch-events -F +pid), cut at an event boundary. Recordings differ
  from run to run (times, pids, addresses); their shape does not.

`recording` and `store` seeds are written by `strato-fuzz seed-recording` / `seed-store` (a real
recorder run; a real import written as a profile): scripts/fuzz.sh seeds runs all of it.

Usage: python3 scripts/fuzz-seeds.py [--data ../shared/data] [--out fuzz/corpus] [--max-bytes N]
Larger --max-bytes gives bigger seeds for a long campaign (do not commit those).
"""

import argparse
import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

KINETO_WHOLE = [
    "kineto/hta_trace_compare/base.json.gz",
    "kineto/hta_trace_compare/test.json.gz",
    "kineto/hta_triton_example.json.gz",
    "kineto/hta_cpu_only_rank-34.pt.trace.json.gz",
    "kineto/hta_cuda_event_sync_trace.json.gz",
    "kineto/hta_critical_path/cuda_event_sync_multi_stream.json.gz",
    "kineto/tracelens/torch_compile_triton.json.gz",
]
KINETO_SLICED = [
    "kineto/hta_alexnet_trace.json.gz",
    "kineto/hta_critical_path/simple_add_input.json.gz",
    "kineto/tracelens/vllm_decode_full_graph_execution.json.gz",
    "kineto/tracelens/sglang_Qwen3-8B_decode.json.gz",
    "kineto/param_dlrm8/worker0_step_12.1694128201545.pt.trace.json.gz",
    "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
    "kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz",
    "kineto/hta_nccl_data.json.gz",
    "kineto/hta_ns_resolution_rank-0.pt.trace.json.gz",
    "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
]
GZIP_KEPT = "kineto/hta_trace_compare/base.json.gz"


def stem(rel):
    name = Path(rel).name
    for suffix in (".gz", ".json", ".pt.trace", ".sqlite", ".pb", ".xplane", ".csv"):
        name = name.removesuffix(suffix)
    return name


def json_window(doc, max_bytes, position=0.5):
    """The document with traceEvents cut to metadata events plus a window of timed events
    starting at `position` of the time-sorted list, within max_bytes."""
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"][:64]
    timed = sorted(
        (e for e in events if e.get("ph") != "M"),
        key=lambda e: e.get("ts") if isinstance(e.get("ts"), (int, float)) else 0,
    )
    start = int(len(timed) * position)
    out = dict(doc)
    kept = list(meta)
    # The budget is for events: a big header (device properties) is kept whole.
    size = len(json.dumps(kept))
    for e in timed[start:]:
        text = json.dumps(e)
        if size + len(text) + 2 > max_bytes:
            break
        kept.append(e)
        size += len(text) + 2
    out["traceEvents"] = kept
    return out


def write_json(doc, path):
    # One event per line, Kineto's own layout.
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = [json.dumps(e) for e in doc["traceEvents"]]
    text = json.dumps(head)[:-1]
    text += (", " if head else "") + '"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n"
    path.write_text(text)


def chrome_seeds(data, out, max_bytes):
    out.mkdir(parents=True, exist_ok=True)
    for rel in KINETO_WHOLE:
        src = data / rel
        if rel == GZIP_KEPT:
            shutil.copyfile(src, out / (stem(rel) + ".json.gz"))
        raw = gzip.decompress(src.read_bytes())
        if len(raw) <= max_bytes:
            (out / (stem(rel) + ".json")).write_bytes(raw)
        else:
            write_json(json_window(json.loads(raw), max_bytes), out / (stem(rel) + ".json"))
    for rel in KINETO_SLICED:
        doc = json.loads(gzip.decompress((data / rel).read_bytes()))
        write_json(json_window(doc, max_bytes), out / (stem(rel) + ".json"))


def tf_seeds(data, out, max_bytes):
    out.mkdir(parents=True, exist_ok=True)
    doc = json.loads(gzip.decompress((data / "tf/GPU-multi-worker.trace_viewer.json.gz").read_bytes()))
    for position in (0.0, 0.5, 0.9):
        write_json(
            json_window(doc, max_bytes, position),
            out / f"GPU-multi-worker-{int(position * 100):02d}.json",
        )


# --- protobuf wire format (for XPlane slicing without a protobuf library) ---


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def put_varint(value):
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fields(buf):
    """(field number, wire type, raw bytes of the whole field, payload for length-delimited)."""
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        payload = None
        if wire == 0:
            _, pos = varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = varint(buf, pos)
            payload = buf[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, buf[start:pos], payload


def rewrite(buf, keep):
    """Re-encodes a message; keep(number, payload, count) returns new payload bytes, or None to
    drop the field (count = how many of this field number were kept so far)."""
    out = bytearray()
    counts = {}
    for number, wire, raw, payload in fields(buf):
        if wire != 2:
            out += raw
            continue
        new = keep(number, payload, counts.get(number, 0))
        if new is None:
            continue
        counts[number] = counts.get(number, 0) + 1
        out += put_varint(number << 3 | 2) + put_varint(len(new)) + new
    return bytes(out)


def varint_fields(buf, number):
    for n, wire, raw, _ in fields(buf):
        if n == number and wire == 0:
            yield varint(raw, len(put_varint(n << 3)))[0]


def slice_xspace(buf, events_per_line, lines_per_plane):
    # XSpace.planes = 1; XPlane.lines = 3, event_metadata = 4, stat_metadata = 5, stats = 6;
    # XLine.events = 4; XEvent.metadata_id = 1, stats = 4; XStat.metadata_id = 1; a map entry
    # is {key = 1, value = 2}; XEventMetadata.stats = 5 (crates/strato-io/src/xplane/proto.rs).
    def line(number, payload, count):
        if number == 4:
            return payload if count < events_per_line else None
        return payload

    def stat_ids(message, stats_field):
        ids = set()
        for n, _, _, payload in fields(message):
            if n == stats_field and payload is not None:
                ids.update(varint_fields(payload, 1))
        return ids

    def plane(number, payload, count):
        if number == 3:
            return rewrite(payload, line) if count < lines_per_plane else None
        return payload

    def prune(plane_buf):
        kept = rewrite(plane_buf, plane)
        events, stats = set(), stat_ids(kept, 6)
        for n, _, _, line_buf in fields(kept):
            if n == 3:
                for m, _, _, event in fields(line_buf):
                    if m == 4:
                        events.update(varint_fields(event, 1))
                        stats |= stat_ids(event, 4)
        for n, _, _, entry in fields(kept):
            if n == 4 and next(varint_fields(entry, 1), None) in events:
                for m, _, _, value in fields(entry):
                    if m == 2:
                        stats |= stat_ids(value, 5)

        def entries(number, payload, count):
            if number == 4:
                return payload if next(varint_fields(payload, 1), None) in events else None
            if number == 5:
                return payload if next(varint_fields(payload, 1), None) in stats else None
            return payload

        return rewrite(kept, entries)

    return rewrite(buf, lambda n, p, c: prune(p) if n == 1 else p)


def xplane_seeds(data, out, max_bytes):
    out.mkdir(parents=True, exist_ok=True)
    for rel in ("xplane_jax/mi300_jax_conv_minimal_08.xplane.pb", "tf/GPU-multi-worker.xplane.pb"):
        buf = (data / rel).read_bytes()
        for events in (64, 16, 4, 1):
            sliced = slice_xspace(buf, events, 8)
            if len(sliced) <= max_bytes or events == 1:
                break
        (out / (stem(rel) + ".xplane.pb")).write_bytes(sliced)


def nsys_seeds(data, out, rows):
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work.sqlite"
        shutil.copyfile(data / "nsys/pipit_cloverleaf_cuda.sqlite", work)
        con = sqlite3.connect(work)
        tables = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        kernel, runtime = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
        # Kernels (and copies) from the middle of the run, with their runtime calls.
        for table in (kernel, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
            if table in tables:
                (total,) = con.execute(f"SELECT count(*) FROM {table}").fetchone()
                con.execute(
                    f"DELETE FROM {table} WHERE rowid NOT IN "
                    f"(SELECT rowid FROM {table} ORDER BY start LIMIT {rows} OFFSET {total // 2})"
                )
        con.execute(
            f"DELETE FROM {runtime} WHERE correlationId NOT IN "
            f"(SELECT correlationId FROM {kernel} UNION SELECT correlationId FROM "
            f"CUPTI_ACTIVITY_KIND_MEMCPY) AND rowid NOT IN "
            f"(SELECT rowid FROM {runtime} ORDER BY start LIMIT {rows})"
        )
        big = [t for t in tables if t not in (kernel, runtime, "StringIds") and not t.startswith("ENUM_")]
        for table in big:
            con.execute(
                f'DELETE FROM "{table}" WHERE rowid NOT IN (SELECT rowid FROM "{table}" LIMIT {rows})'
            )
        # Tables the importer never reads (crates/strato-io/src/nsys/ names the ones it
        # does) go: each costs pages and nothing else.
        nsys_dir = Path(__file__).resolve().parent.parent / "crates/strato-io/src/nsys"
        importer = "\n".join(p.read_text() for p in sorted(nsys_dir.glob("*.rs")))
        for table in tables:
            if f'"{table}"' not in importer:
                con.execute(f'DROP TABLE "{table}"')
        tables = [t for t in tables if f'"{t}"' in importer]
        referenced = set()
        for table in tables:
            if table == "StringIds":
                continue
            for row in con.execute(f'SELECT * FROM "{table}"'):
                referenced.update(v for v in row if isinstance(v, int))
        con.execute("CREATE TEMP TABLE keep(id INTEGER PRIMARY KEY)")
        con.executemany("INSERT OR IGNORE INTO keep VALUES (?)", [(v,) for v in referenced if -(2**63) <= v < 2**63])
        con.execute("DELETE FROM StringIds WHERE id NOT IN (SELECT id FROM keep)")
        con.commit()
        con.execute("PRAGMA page_size = 512")
        con.execute("VACUUM")
        con.close()
        shutil.copyfile(work, out / "pipit_cloverleaf_cuda.sqlite")


def ncu_seeds(data, out):
    out.mkdir(parents=True, exist_ok=True)
    src = data / "ncu/gemm_tiled.csv"
    shutil.copyfile(src, out / "gemm_tiled.csv")
    lines = src.read_bytes().splitlines(keepends=True)
    header = next(i for i, l in enumerate(lines) if l.startswith(b'"ID"'))
    (out / "gemm_tiled_head.csv").write_bytes(b"".join(lines[: header + 4]))


def rocprof_seeds(data, out, dispatches=24):
    """The real rocprofv3 JSON cut to its first dispatches (agents, kind names and the kernel
    symbols they use kept), and the same with HIP API calls, a marker and memory copies added
    to the documented schema (the real file has none)."""
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(data / "rocprof/tracelens_908_results.json.gz", "rt") as f:
        doc = json.load(f)
    process = doc["rocprofiler-sdk-tool"][0]
    records = process["buffer_records"]["kernel_dispatch"][:dispatches]
    used = {r["dispatch_info"]["kernel_id"] for r in records}
    # Agents the dispatches use plus one CPU, their long lists (caches, io_links) cut; kind
    # names with their first operations (the fuzzer needs the shape, not the whole table).
    used_agents = {r["dispatch_info"]["agent_id"]["handle"] for r in records}
    agents = [a for a in process.get("agents", [])
              if a["id"]["handle"] in used_agents or a.get("type") == 1][:3]
    for a in agents:
        for key in ("caches", "io_links", "mem_banks"):
            if isinstance(a.get(key), list):
                a[key] = a[key][:2]
    kinds = [dict(k, operations=k.get("operations", [])[:12])
             for k in process.get("strings", {}).get("buffer_records", [])]
    cut = {
        "metadata": process.get("metadata", {}),
        "agents": agents,
        "strings": {"buffer_records": kinds},
        "kernel_symbols": [k for k in process.get("kernel_symbols", []) if k["kernel_id"] in used],
        "buffer_records": {"kernel_dispatch": records},
    }
    (out / "tracelens_908_head.json").write_text(json.dumps({"rocprofiler-sdk-tool": [cut]}))
    kinds = [k.get("kind") for k in cut["strings"]["buffer_records"]]
    hip = kinds.index("HIP_RUNTIME_API") if "HIP_RUNTIME_API" in kinds else 5
    copy = kinds.index("MEMORY_COPY") if "MEMORY_COPY" in kinds else 10
    marker = kinds.index("MARKER_CORE_API") if "MARKER_CORE_API" in kinds else 7
    gpu = next(a for a in cut["agents"] if a.get("type") == 2)["id"]
    cpu = next((a for a in cut["agents"] if a.get("type") == 1), {"id": gpu})["id"]
    api, copies = [], []
    for r in records[:8]:
        corr = r["correlation_id"]
        start = r["start_timestamp"] - 2000
        api.append({"size": 64, "kind": hip, "operation": 1, "thread_id": r.get("thread_id", 1),
                    "correlation_id": corr, "start_timestamp": start,
                    "end_timestamp": start + 800})
        copies.append({"size": 96, "kind": copy, "operation": 2, "thread_id": 1,
                       "correlation_id": corr, "start_timestamp": r["end_timestamp"] + 10,
                       "end_timestamp": r["end_timestamp"] + 500, "dst_agent_id": gpu,
                       "src_agent_id": cpu, "bytes": 4096})
    first = records[0]["start_timestamp"]
    markers = [{"size": 64, "kind": marker, "operation": 1, "thread_id": 1,
                "correlation_id": {"internal": 999999, "external": 0},
                "start_timestamp": first - 5000, "end_timestamp": records[7]["end_timestamp"]}]
    cut["buffer_records"] = {"kernel_dispatch": records[:8], "hip_api": api,
                             "memory_copy": copies, "marker_api": markers}
    (out / "schema_api_copies.json").write_text(json.dumps({"rocprofiler-sdk-tool": [cut]}))


def perfetto_seeds(root, out):
    """The rocprofv3-layout Perfetto test file (written with Perfetto's own protos by
    scripts/perfetto-fixture.py); scripts/fuzz.sh seeds adds an export of stratoscope's own."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "crates/strato-io/tests/data/perfetto/rocprofv3_like.pftrace",
                    out / "rocprofv3_like.pftrace")


# System calls kept by the raw_syscalls filter (x86_64 numbers: write, nanosleep, fsync, futex,
# wait4, clock_nanosleep): the blocking causes, without the hundreds of calls of a start-up.
PERF_SYSCALL_FILTER = "id == 1 || id == 35 || id == 74 || id == 202 || id == 61 || id == 230"


def perf_record(args, out, workload):
    subprocess.run(["perf", "record", "-q", *args, "-o", str(out), "--", *workload],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def perf_script(data, args):
    return subprocess.run(["perf", "script", *args, "-i", str(data)], check=True,
                          capture_output=True).stdout


def cut_script(text, max_bytes):
    """`perf script` text cut after the last whole event (its call-stack lines included)
    within max_bytes; comment lines at the top are kept."""
    out, size = [], 0
    for line in text.splitlines(keepends=True):
        starts_event = line.strip() and not line.startswith((b"\t", b"#"))
        if starts_event and size + len(line) > max_bytes:
            break
        out.append(line)
        size += len(line)
    return b"".join(out).rstrip(b"\n") + b"\n"


def perf_seeds(out_data, out_script, max_bytes):
    """perf.data files recorded here with the real perf tool, and their `perf script` text."""
    if shutil.which("perf") is None:
        print("perf_data, perf_script: no `perf` tool (Debian linux-perf); seeds not regenerated")
        return
    out_data.mkdir(parents=True, exist_ok=True)
    out_script.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sched, cpu, cpu_py, switch, named = (
            tmp / n for n in ("sched.data", "cpu.data", "cpu_py.data", "switch.data",
                              "named.data"))
        # Thread states: a shell forks a sleeper and an fsync-bound dd (blocked:sleep, io,
        # wakeups, a child's exit), on CLOCK_MONOTONIC (-k mono).
        perf_record(["-k", "mono", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup",
                     "-e", "sched:sched_migrate_task",
                     "-e", "raw_syscalls:sys_enter", "--filter", PERF_SYSCALL_FILTER,
                     "-e", "raw_syscalls:sys_exit", "--filter", PERF_SYSCALL_FILTER],
                    sched, ["sh", "-c", f"sleep 0.01 & dd if=/dev/zero of={tmp}/w bs=64k "
                            "count=1 conv=fsync 2>/dev/null; wait"])
        # CPU samples with frame-pointer call chains and the mappings to symbolize them: for
        # perf.data a small C program (importing it loads the mapped files' symbol tables, and
        # libpython's would cost each fuzz run ~150 ms), for the text a Python loop (the real
        # interpreter, not a pyenv shim).
        perf_record(["-F", "999", "-g"], cpu,
                    ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000"])
        perf_record(["-F", "999", "-g"], cpu_py,
                    [sys.executable, "-c", "sum(i * i for i in range(200000))"])
        # No tracepoints, no tracing data: PERF_RECORD_SWITCH and page faults.
        perf_record(["--switch-events", "-e", "page-faults"], switch, ["sleep", "0.01"])
        # Per-call tracepoints (syscalls:sys_enter_NAME / sys_exit_NAME).
        perf_record(["-e", "syscalls:sys_enter_clock_nanosleep",
                     "-e", "syscalls:sys_exit_clock_nanosleep",
                     "-e", "syscalls:sys_enter_openat", "-e", "syscalls:sys_exit_openat"],
                    named, ["sleep", "0.01"])
        for data in (sched, cpu, switch, named):
            shutil.copyfile(data, out_data / data.name.replace(".data", ".perf.data"))
        texts = {
            "sched-header-ns-tasks.txt": (sched, ["--header", "--ns", "--show-task-events"]),
            "cpu-callchains.txt": (cpu_py, []),
            "cpu-fields.txt": (cpu_py, ["-F", "comm,tid,time,event,ip,sym,dso"]),
            "cpu-fields-pid-ns.txt": (cpu_py, ["-F", "comm,pid,tid,time,period,event,ip,sym,dso,"
                                                  "symoff", "--ns", "-G"]),
            "cpu-no-callchain.txt": (cpu_py, ["-G"]),
            "switch-events-pid.txt": (switch, ["--show-switch-events", "-F", "+pid"]),
            "named-syscalls-ns.txt": (named, ["--ns"]),
        }
        for name, (data, args) in texts.items():
            (out_script / name).write_bytes(cut_script(perf_script(data, args), max_bytes))


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=root.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=root / "fuzz" / "corpus")
    ap.add_argument("--max-bytes", type=int, default=24_000)
    ap.add_argument("--nsys-rows", type=int, default=24)
    args = ap.parse_args()
    chrome_seeds(args.data, args.out / "chrome", args.max_bytes)
    tf_seeds(args.data, args.out / "tf", args.max_bytes)
    xplane_seeds(args.data, args.out / "xplane", args.max_bytes * 2)
    nsys_seeds(args.data, args.out / "nsys", args.nsys_rows)
    ncu_seeds(args.data, args.out / "ncu")
    rocprof_seeds(args.data, args.out / "rocprof")
    perfetto_seeds(root, args.out / "perfetto")
    perf_seeds(args.out / "perf_data", args.out / "perf_script", args.max_bytes // 3)
    for d in sorted(args.out.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()

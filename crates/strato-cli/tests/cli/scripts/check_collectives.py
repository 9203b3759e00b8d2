"""Independent check of `strato collectives --json` against the raw Kineto files.

Reads the per-rank trace files itself (no stratoscope code), and checks:
- per rank, the number of NCCL/RCCL kernels (cat "kernel", name starting nccl/rccl or holding
  ncclKernel) equals the rank's `collectives` count and its members across instances;
- per instance and rank, the member's local start (start_ns - the rank's clock shift) is the
  start of one of that rank's collective kernels, and (old traces without args, matched by
  order) the start of the rank's k-th kernel of that kind, k the instance's `ordinal`;
- who starts last: from the raw kernel starts plus the clock shifts, where the last rank leads
  the second-last by more than twice the alignment error.
Usage: check_collectives.py REPORT.json TRACE... (trace order = rank order). Prints a summary
line; exits 1 with the reasons on a mismatch.
"""
import gzip
import json
import sys
from decimal import Decimal


def kernels(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)  # epoch us: floats lose ns
    rank = (doc.get("distributedInfo") or {}).get("rank")
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        name = e.get("name", "")
        low = name[:5].lower()
        if low.startswith("nccl") or low.startswith("rccl") or "ncclKernel" in name:
            out.append((int(Decimal(e["ts"]) * 1000), name))
    out.sort()
    return rank, out


def kind_of(name):
    n = name.split("(")[0].replace("_", "").lower()
    for key, kind in (("allreduce", "all_reduce"), ("allgather", "all_gather"),
                      ("reducescatter", "reduce_scatter"), ("alltoall", "all_to_all"),
                      ("broadcast", "broadcast"), ("sendrecv", "send/recv")):
        if key in n:
            return kind
    return None


def main():
    report = json.load(open(sys.argv[1]))
    traces = sys.argv[2:]
    errors = []
    shift = {r["rank"]: r["clock_shift_ns"] for r in report["ranks"]}
    per_rank = {}
    for i, path in enumerate(traces):
        rank, ks = kernels(path)
        per_rank[i if rank is None else rank] = ks
    members = {r: 0 for r in per_rank}
    for c in report["collectives"]:
        for m in c["ranks"]:
            members[m["rank"]] = members.get(m["rank"], 0) + 1
    for r in report["ranks"]:
        n = len(per_rank.get(r["rank"], []))
        if r["collectives"] != n or members.get(r["rank"]) != n:
            errors.append(f"rank {r['rank']}: {n} kernels in the file, report {r['collectives']}, members {members.get(r['rank'])}")
    # Last arrivals: recomputed from the raw starts of each member.
    lasts = 0
    checked_last = 0
    err = report["clock"]["max_error_ns"] or 0
    for c in report["collectives"]:
        if not c["complete"]:
            if c["last_rank"] is not None or c["transfer_ns"] is not None:
                errors.append(f"incomplete collective has a last rank or transfer: {c}")
            continue
        starts = []
        for m in c["ranks"]:
            local = m["start_ns"] - shift[m["rank"]]
            raw = [t for t, _ in per_rank[m["rank"]]]
            if local not in raw:
                errors.append(f"rank {m['rank']}: no kernel starts at {local} ns")
            if c.get("matched_by") == "kind_order":
                of_kind = [t for t, n in per_rank[m["rank"]] if kind_of(n) == c["kind"]]
                k = c["ordinal"]
                if k >= len(of_kind) or of_kind[k] != local:
                    errors.append(f"rank {m['rank']}: {c['kind']} #{k} is not the kernel at {local} ns")
            starts.append((local + shift[m["rank"]], m["rank"]))
        starts.sort()
        if len(starts) >= 2 and starts[-1][0] - starts[-2][0] > 2 * err:
            checked_last += 1
            if starts[-1][1] != c["last_rank"]:
                errors.append(f"last rank {c['last_rank']} but rank {starts[-1][1]} starts last")
            else:
                lasts += 1
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    total = sum(len(v) for v in per_rank.values())
    print(f"ok: {total} kernels on {len(per_rank)} ranks, {len(report['collectives'])} collectives, last rank confirmed in {lasts}/{checked_last}")


main()

"""Processes: multiprocessing fork and spawn children record their own files into the same
profile; a SIGKILLed program still loads up to its last flush; the self-play example yields
one process per worker and a per-process breakdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, info, spans, strato

MP_SCRIPT = """
import multiprocessing as mp, sys
import stratoscope as rls

def work(i):
    with rls.operation(f"child{i}"):
        sum(range(10000))
    return i

if __name__ == "__main__":
    rls.start(sys.argv[2], level=3)
    with rls.operation("parent"):
        ctx = mp.get_context(sys.argv[1])
        procs = [ctx.Process(target=work, args=(i,)) for i in range(3)]
        [p.start() for p in procs]
        [p.join() for p in procs]
    rls.stop()
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_children_record(tmp_path, profile_dir, method):
    script = tmp_path / "mp.py"
    script.write_text(MP_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATOSCOPE_")}
    subprocess.run([sys.executable, str(script), method, str(profile_dir)], check=True,
                   env=env, timeout=300)
    files = list(profile_dir.glob("*.strato"))
    assert len(files) == 4, files
    evs = spans(profile_dir, tmp_path)
    pids = {e["pid"] for e in evs if e["name"].startswith("child")}
    assert len(pids) == 3
    parent = [e for e in evs if e["name"] == "parent"]
    assert len(parent) == 1 and parent[0]["pid"] not in pids


def test_sigkill_mid_run_loads_up_to_last_flush(tmp_path, profile_dir):
    script = tmp_path / "killed.py"
    script.write_text(f"""
import sys, time
import stratoscope as rls
rls.start({str(profile_dir)!r}, level=1, flush_interval_ms=10)
i = 0
while True:
    with rls.operation("tick"):
        time.sleep(0.001)
    i += 1
    if i == 100:
        print("ready", flush=True)
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATOSCOPE_")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    evs = spans(profile_dir, tmp_path)
    ticks = [e for e in evs if e["name"] == "tick"]
    assert len(ticks) >= 100  # everything before the last flush (10 ms) at least
    doc = info(profile_dir)
    assert json.dumps(doc)  # the profile loads and summarises


def test_selfplay_example_four_processes(tmp_path, profile_dir):
    proc = strato("record", "--json", "-o", str(profile_dir), "--", sys.executable,
                  str(REPO / "examples" / "selfplay.py"), "--workers", "4", "--games", "1",
                  "--sims", "8")
    doc = json.loads(proc.stdout)
    assert len(list(profile_dir.glob("*.strato"))) == 5  # main + 4 workers
    workers = [p for p in doc["processes"] if (p.get("name") or "").startswith("selfplay-worker")]
    assert len(workers) == 4
    for w in workers:
        ops = {r["operation"] for r in w["rows"]}
        assert "mcts_tree_search" in ops or "expand_leaf" in ops
        assert sum(r["time_ns"] for r in w["rows"]) == w["window_ns"]

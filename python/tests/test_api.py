"""The Python API: operations (context manager, decorator, nesting), phases, threads,
process names, start/stop, and the level table."""

from __future__ import annotations

from collections import Counter

import stratoscope
from conftest import run_script, spans


def test_operations_nest_and_decorate(tmp_path, profile_dir):
    run_script(tmp_path, f"""
        import stratoscope as rls
        rls.start({str(profile_dir)!r}, level=1)
        rls.set_process_name("trainer")
        rls.set_phase("training")

        @rls.operation("backpropagation")
        def train():
            return sum(range(100))

        for _ in range(3):
            with rls.operation("step"):
                with rls.operation("inference"):
                    pass
                train()
        rls.set_phase("evaluation")
        with rls.operation("eval"):
            pass
        rls.stop()
    """)
    evs = spans(profile_dir, tmp_path)
    names = Counter(e["name"] for e in evs)
    assert names["step"] == 3 and names["inference"] == 3 and names["backpropagation"] == 3
    assert names["training"] == 1 and names["evaluation"] == 1 and names["eval"] == 1
    steps = sorted((e for e in evs if e["name"] == "step"), key=lambda e: e["ts"])
    infs = sorted((e for e in evs if e["name"] == "inference"), key=lambda e: e["ts"])
    for s, i in zip(steps, infs):
        assert s["ts"] <= i["ts"] and i["ts"] + i["dur"] <= s["ts"] + s["dur"]


def test_threads_record_on_their_own_tracks(tmp_path, profile_dir):
    run_script(tmp_path, f"""
        import threading
        import stratoscope as rls
        rls.start({str(profile_dir)!r}, level=3)
        def work(i):
            for _ in range(200):
                with rls.operation(f"worker{{i}}"):
                    pass
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        rls.stop()
    """)
    evs = spans(profile_dir, tmp_path)
    by_name = Counter(e["name"] for e in evs)
    for i in range(4):
        assert by_name[f"worker{i}"] == 200
    tids = {e["tid"] for e in evs if e["name"].startswith("worker")}
    assert len(tids) == 4


def test_level_zero_records_no_events(tmp_path, profile_dir):
    run_script(tmp_path, f"""
        import stratoscope as rls
        rls.start({str(profile_dir)!r}, level=0)
        with rls.operation("x"):
            pass
        rls.stop()
    """)
    assert [e for e in spans(profile_dir, tmp_path) if e["name"] == "x"] == []
    assert len(list(profile_dir.glob("*.strato"))) == 1


def test_level_table_and_api_surface():
    assert stratoscope.level_of_module("torch.nn.functional") == "Backend"
    assert stratoscope.level_of_module("gymnasium.envs.classic_control") == "Simulator"
    assert stratoscope.level_of_module("numpy.linalg") == "Library"
    assert stratoscope.level_of_module("numpyx") is None
    assert stratoscope.level_of_module("builtins") is None
    before = stratoscope.level_table()
    try:
        stratoscope.set_level_table({"mysim": "Simulator"})
        assert stratoscope.level_of_module("mysim.core") == "Simulator"
        assert stratoscope.level_of_module("numpy") is None
    finally:
        stratoscope.set_level_table(before)
    assert not stratoscope.is_recording()
    with stratoscope.operation("not recording"):  # a no-op when stopped
        pass

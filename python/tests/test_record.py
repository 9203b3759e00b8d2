"""Transition interception and `strato record`: the hook classifies numpy (Library) and
gymnasium (Simulator) calls without code changes; wrappers cover ufuncs and environments;
`strato record --json` has the breakdown's shape; `--calibrate` adds a validation."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import REPO, run_script, spans, strato

gym = pytest.importorskip("gymnasium")


def test_hook_classifies_numpy_and_gymnasium(tmp_path, profile_dir):
    run_script(tmp_path, f"""
        import numpy as np, gymnasium as gym
        import stratoscope as rls
        rls.start({str(profile_dir)!r}, level=3)
        env = gym.make("CartPole-v1")
        env.reset(seed=0)
        with rls.operation("step"):
            a = np.zeros(1000)           # builtin function of numpy: c_call
            m = np.mean(a)               # numpy's Python-level function
            env.step(0)                  # pure-Python gymnasium code
        rls.stop()
    """)
    evs = spans(profile_dir, tmp_path)
    cats = {(e["cat"], e["name"]) for e in evs}
    assert ("library", "numpy.zeros") in cats
    assert any(c == "library" and "mean" in n for c, n in cats)
    sims = [n for c, n in cats if c == "simulator"]
    assert any("step" in n for n in sims), sims


def test_wrappers_record_ufuncs_and_envs(tmp_path, profile_dir):
    run_script(tmp_path, f"""
        import numpy as np, gymnasium as gym
        import stratoscope as rls
        rls.start({str(profile_dir)!r}, level=4)
        assert rls.wrap_module(np, "Library", names=["tanh", "dot"]) == 2
        env = rls.wrap_env(gym.make("CartPole-v1"))
        env.reset(seed=0)
        with rls.operation("step"):
            np.tanh(np.ones(3))
            np.dot(np.ones(3), np.ones(3))
            env.step(1)
        rls.unwrap_all()
        rls.stop()
    """)
    evs = spans(profile_dir, tmp_path)
    cats = {(e["cat"], e["name"]) for e in evs}
    assert ("library_wrap", "numpy.tanh") in cats
    assert ("library_wrap", "numpy.dot") in cats
    assert ("simulator_wrap", "CartPoleEnv.step") in cats
    # The hook does not record gymnasium again inside the wrapped step.
    step = next(e for e in evs if e["name"] == "CartPoleEnv.step")
    inner = [e for e in evs if e["cat"] == "simulator" and e["tid"] == step["tid"]
             and step["ts"] <= e["ts"] < step["ts"] + step["dur"]]
    assert inner == []


def test_record_json_shape(tmp_path, profile_dir):
    proc = strato("record", "--json", "-o", str(profile_dir), "--", sys.executable,
                  str(REPO / "examples" / "rl_cartpole.py"), "--steps", "200")
    doc = json.loads(proc.stdout)
    assert doc["profile"] == str(profile_dir)
    (p,) = doc["processes"]
    assert sum(r["time_ns"] for r in p["rows"]) == p["window_ns"]
    ops = {r["operation"] for r in p["rows"]}
    assert {"inference", "simulation", "backpropagation"} <= ops
    levels = {r["cpu_level"] for r in p["rows"] if r["operation"] == "simulation"}
    assert "Simulator" in levels
    assert "validation" not in doc


def test_record_calibrate_validates(tmp_path, profile_dir):
    proc = strato("record", "--calibrate", "--repeat", "1", "--json", "-o", str(profile_dir),
                  "--", sys.executable, str(REPO / "examples" / "rl_cartpole.py"),
                  "--steps", "300")
    doc = json.loads(proc.stdout)
    v = doc["validation"]
    for key in ("uninstrumented_s", "instrumented_s", "corrected_s", "bias_pct"):
        assert isinstance(v[key], float), key
    assert v["instrumented_s"] >= v["corrected_s"] > 0
    cal = json.loads((profile_dir / "calibration.json").read_text())
    assert set(cal["costs_ns"]) >= {"annotation", "untraced_hook"}
    # Every run stopped cleanly, so the fit is on the recording thread's CPU time, and the
    # wall-clock figures come along.
    assert cal["basis"] == "thread_cpu" and v["basis"] == "thread_cpu"
    assert isinstance(v["wall"]["bias_pct"], float)
    for run in cal["runs"]:
        for cpu, wall in zip(run["cpu_times_s"], run["times_s"]):
            assert 0 < cpu <= wall * 1.01, run
    again = json.loads(strato("validate", str(profile_dir), "--json").stdout)
    assert again["validation"]["basis"] == "thread_cpu"
    assert again["validation"]["wall"]["instrumented_s"] > 0


def test_wrapping_all_of_numpy_keeps_docstrings(tmp_path, profile_dir):
    # numpy.ma rewrites np.arange's docstring at import; wrappers forward __doc__, and wrapping
    # does not import numpy's lazy submodules half-way.
    run_script(tmp_path, f"""
        import numpy as np
        import stratoscope as rls
        rls.start({str(profile_dir)!r}, level=4)
        assert rls.wrap_module(np) > 100
        assert "Return evenly spaced values" in np.arange.__doc__
        import numpy.ma
        assert list(np.ma.arange(3)) == [0, 1, 2]
        rls.unwrap_all()
        rls.stop()
    """)


def test_record_levels(tmp_path, profile_dir):
    proc = strato("record", "--levels", "--repeat", "1", "--json", "-o", str(profile_dir),
                  "--", sys.executable, str(REPO / "examples" / "rl_cartpole.py"),
                  "--steps", "100")
    doc = json.loads(proc.stdout)
    runs = doc["levels"]["runs"]
    assert [r["level"] for r in runs] == [0, 1, 3, 4]
    strata = {s["stratum"]: s["from_level"] for s in doc["levels"]["strata"]}
    assert strata["Operation"] == 1
    assert strata["Simulator"] == 3

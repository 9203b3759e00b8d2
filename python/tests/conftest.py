"""Helpers for the stratoscope package tests: run `strato` (through `python -m stratoscope`,
the same code as the console script) and read a profile's spans through its Chrome export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def strato(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STRATOSCOPE_")}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "stratoscope", *args], capture_output=True,
                          text=True, env=full_env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"strato {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def run_script(tmp_path: Path, source: str, *args: str, env: dict | None = None,
               check: bool = True) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STRATOSCOPE_")}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=full_env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"script failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def spans(profile: Path, tmp_path: Path) -> list[dict]:
    """Complete events of the profile, via `strato export --chrome`."""
    out = tmp_path / "export.json"
    strato("export", str(profile), "--chrome", str(out))
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "X"]


def info(profile: Path) -> dict:
    return json.loads(strato("info", str(profile), "--json").stdout)


@pytest.fixture
def profile_dir(tmp_path: Path) -> Path:
    return tmp_path / "prof"

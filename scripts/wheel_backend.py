"""PEP 517 build backend of the `stratoscope` wheel (pyproject.toml names it): maturin, plus the
native programs maturin cannot put in the same wheel.

maturin builds one cdylib per wheel (the recorder extension `stratoscope._native`, crate
strato-python). The wheel also needs three artifacts of other crates: the `strato` command
(strato-cli), the measurement worker (strato-measure's `strato-measure-worker`) and the OpenCL
layer (strato-opencl-layer's `libstrato_opencl_layer.so`, which ocl-icd loads into the recorded
program). `build_wheel` builds them with one `cargo build` in the same profile (`wheel`:
release, no debug info, stripped) and target dir that maturin then uses, so the dependencies
compile once; stages them in `python/stratoscope/_bin/` (git-ignored), where the
`[tool.maturin] include` pattern puts them in the wheel next to the Python package; lets maturin
build the wheel; checks that the wheel holds them; and removes the staging directory.

Every other hook is maturin's. Editable installs (`pip install -e .`) stage nothing: the
package then finds the programs in the cargo target dir (see `stratoscope.cli.strato_binary`).

`STRATOSCOPE_WHEEL_PROFILE=test` builds the same wheel from the Cargo profile `test`, the one
`cargo test` builds: every artifact comes from the test build already in the target dir (no
second, release build of every dependency), and is stripped as the `wheel` profile strips. The
test suite installs the package that way (`scripts/test.sh`: CI's time); users and
`scripts/check-wheel.sh` get the release build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from maturin import (  # noqa: F401  (re-exported PEP 517 hooks)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)
from maturin import build_wheel as _maturin_build_wheel

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "python" / "stratoscope" / "_bin"
# The cargo profile of every artifact in the wheel: pyproject.toml's [tool.maturin] profile,
# unless STRATOSCOPE_WHEEL_PROFILE names another (the test suite's `test`, module docstring).
RELEASE_PROFILE = "wheel"
PROFILE = os.environ.get("STRATOSCOPE_WHEEL_PROFILE") or RELEASE_PROFILE
# (cargo package, target selection, target name, file name in the wheel's stratoscope/_bin/)
PROGRAMS = [
    ("strato-cli", "--bin", "strato", "strato"),
    ("strato-measure", "--bin", "strato-measure-worker", "strato-measure-worker"),
    ("strato-opencl-layer", "--lib", "strato_opencl_layer", "libstrato_opencl_layer.so"),
]
# Extension modules beside maturin's (cargo package, library target name, module file in the
# wheel's stratoscope/): the analysis API (`stratoscope._analysis`), kept out of the recorder
# extension loaded into every recorded process. Staged next to the Python sources (git-ignored)
# where the `[tool.maturin] include` pattern picks it up.
EXTENSIONS = [
    ("strato-python-analysis", "_analysis", "_analysis.so"),
]
PACKAGE = ROOT / "python" / "stratoscope"


def _cargo_build() -> dict[str, Path]:
    """Builds the programs; returns the artifact of each target name (paths from cargo's own
    report, so CARGO_TARGET_DIR and .cargo/config are honoured)."""
    # Not --locked: a source distribution has no `fuzz` member, so cargo drops its packages from
    # Cargo.lock (offline; nothing else changes). CI checks the lock (cargo test --locked).
    cmd = [os.environ.get("CARGO", "cargo"), "build", "--profile", PROFILE,
           "--message-format=json-render-diagnostics"]
    if PROFILE == "test":
        # What `cargo test --workspace` built, with its features (dev-dependencies turn on
        # features of serde, strato-trace, ...; a narrower selection would rebuild everything
        # that depends on them): every target of the workspace, fresh but for the few that
        # `cargo test` does not link (the cdylibs, benches).
        cmd += ["--workspace", "--all-targets"]
    else:
        # `--lib` may be given once: it selects the library of every package named with `-p`.
        for package, selection, target, _ in PROGRAMS:
            cmd += ["-p", package]
            if selection == "--bin":
                cmd += ["--bin", target]
        for package, _, _ in EXTENSIONS:
            cmd += ["-p", package]
        if any(selection == "--lib" for _, selection, _, _ in PROGRAMS) or EXTENSIONS:
            cmd.append("--lib")
    print("stratoscope build: " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"stratoscope build: cargo build failed ({proc.returncode})")
    found: dict[str, Path] = {}
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        # Test harnesses (of `--all-targets`) share their target's name: not an artifact.
        if message.get("reason") != "compiler-artifact" or message["profile"].get("test"):
            continue
        name = message["target"]["name"]
        if message.get("executable"):
            found[name] = Path(message["executable"])
        else:
            for file in message.get("filenames", []):
                if file.endswith(".so"):
                    found[name] = Path(file)
    return found


def _stage(artifact: Path, destination: Path) -> None:
    """Copies a built artifact into the package; outside the release profile (which strips at
    link time) strips it as that profile does, so the wheel holds what a release wheel holds."""
    shutil.copy2(artifact, destination)
    if PROFILE != RELEASE_PROFILE:
        # `.debug_gdb_scripts` (rustc's pointer to its pretty-printers, emitted with debug info)
        # is an allocated section that --strip-all keeps.
        subprocess.run(["strip", "--strip-all", "--remove-section=.debug_gdb_scripts",
                        str(destination)], check=True)


def _maturin_args_for_profile() -> None:
    """Outside the release profile, tells maturin (through MATURIN_PEP517_ARGS, which its PEP
    517 hooks read) to build the recorder extension in the same profile, stripped."""
    if PROFILE == RELEASE_PROFILE:
        return
    # `cargo rustc --profile test` (maturin's build) compiles a test harness: Cargo.toml's
    # `test-ext` is the profile `test` under another name.
    profile = "test-ext" if PROFILE == "test" else PROFILE
    extra = f"--profile {profile} --strip"
    current = os.environ.get("MATURIN_PEP517_ARGS", "")
    os.environ["MATURIN_PEP517_ARGS"] = f"{current} {extra}".strip()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    artifacts = _cargo_build()
    if STAGE.exists():
        shutil.rmtree(STAGE)
    STAGE.mkdir(parents=True)
    try:
        for _, _, target, file_name in PROGRAMS:
            if target not in artifacts:
                raise RuntimeError(f"stratoscope build: cargo reported no artifact for {target}")
            _stage(artifacts[target], STAGE / file_name)
        for _, target, file_name in EXTENSIONS:
            if target not in artifacts:
                raise RuntimeError(f"stratoscope build: cargo reported no artifact for {target}")
            _stage(artifacts[target], PACKAGE / file_name)
        _maturin_args_for_profile()
        wheel_name = _maturin_build_wheel(wheel_directory, config_settings, metadata_directory)
    finally:
        shutil.rmtree(STAGE, ignore_errors=True)
        for _, _, file_name in EXTENSIONS:
            (PACKAGE / file_name).unlink(missing_ok=True)
    with zipfile.ZipFile(Path(wheel_directory) / wheel_name) as wheel:
        names = set(wheel.namelist())
    missing = [f for *_, f in PROGRAMS if f"stratoscope/_bin/{f}" not in names]
    missing += [f for *_, f in EXTENSIONS if f"stratoscope/{f}" not in names]
    if missing:
        raise RuntimeError(f"stratoscope build: the wheel {wheel_name} lacks {missing}")
    return wheel_name

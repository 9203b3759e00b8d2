"""The example notebooks run headless (nbclient) and show the numbers of `strato ... --json`:
examples/notebooks/multi_rank_walkthrough.ipynb on the shared 8-rank job. Its last cell
(tagged `summary`) prints one JSON line; each figure in it is recomputed here from the CLI's
JSON on the same input, and the display cells must have rendered their plot and table."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pytest

from conftest import REPO, strato

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")

NOTEBOOK = REPO / "examples" / "notebooks" / "multi_rank_walkthrough.ipynb"
JOB = REPO.parent / "shared" / "data" / "kineto" / "param_dlrm8"

pytestmark = pytest.mark.skipif(not JOB.is_dir(), reason="shared data not present")


def cli(*args: str) -> dict:
    return json.loads(strato(*args, "--json").stdout)


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    return nb


def summary_of(nb) -> dict:
    for cell in nb.cells:
        if "summary" in cell.get("metadata", {}).get("tags", []):
            text = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
            return json.loads(text.strip().splitlines()[-1])
    raise AssertionError("the notebook has no cell tagged 'summary'")


def test_the_notebook_runs_and_shows_the_cli_numbers(executed):
    s = summary_of(executed)
    assert s["ranks"] == 8

    gpu = cli("gpu-time", str(JOB))
    assert len(s["gpu_time"]) == len(gpu["ranks"]) == 8
    for mine, theirs in zip(s["gpu_time"], gpu["ranks"]):
        assert mine["rank"] == theirs["rank"]
        for k in ("compute_pct", "non_compute_pct", "idle_pct"):
            assert math.isclose(mine[k], theirs[k], rel_tol=1e-12), (k, mine, theirs)

    kernels = cli("kernels", "--top", "0", str(JOB))
    totals: dict[str, int] = defaultdict(int)
    for rank in kernels["ranks"]:
        for k in rank["kernels"]:
            totals[k["name"]] += k["total_ns"]
    top5 = sorted(totals.items(), key=lambda kv: -kv[1])[:5]
    assert s["top_kernels"] == dict(top5)

    coll = cli("collectives", str(JOB))
    assert {str(r["rank"]): r["imposed_wait_ns"] for r in coll["ranks"]} == s["imposed_wait_ns"]

    bd = cli("breakdown", str(JOB))
    by: dict[str, int] = defaultdict(int)
    for p in bd["processes"]:
        for row in p["rows"]:
            by[f"{p['rank']}/{row['resource']}"] += row["time_ns"]
    assert s["breakdown_ns"] == dict(by)

    advise = cli("advise", str(JOB))
    assert s["findings"] == sorted({f["rule"] for f in advise["findings"]})
    assert s["findings"], "the job has findings"


def test_the_notebook_displays_plots_and_tables(executed):
    html = [o["data"]["text/html"] for c in executed.cells if c.cell_type == "code"
            for o in c.outputs if "data" in o and "text/html" in o["data"]]
    # The profile and gpu_time cells show the report's SVG plot; the tables render as HTML.
    assert sum("<svg" in h for h in html) >= 2
    assert sum("<table" in h for h in html) >= 4
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "error"]
    assert not errors

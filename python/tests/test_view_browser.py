"""`strato view` driven like a user drives it, in Debian's Chromium through Playwright: open the
8-rank DLRM job, zoom with the keyboard and the wheel, search a kernel, click it on the canvas
and read its details, follow its launch, toggle the critical path overlay, list the findings
and go to one, shift-drag a range for its aggregate. The page's own requests are checked for
errors, and its console for messages."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO

DLRM = REPO.parent / "shared" / "data" / "kineto" / "param_dlrm8"
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.skipif(not DLRM.is_dir(), reason="shared data not present"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (scripts/setup.sh)"),
]

playwright = pytest.importorskip("playwright.sync_api")


@contextlib.contextmanager
def serving(path: Path, *more: str):
    """`strato view PATH [MORE...]` as a user starts it (the installed package); yields the URL
    it prints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATOSCOPE_")}
    proc = subprocess.Popen([sys.executable, "-m", "stratoscope", "view", str(path), *more, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (url, proc.stderr.read() if proc.poll() else "")
        yield url
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def page_at(url: str):
    """The page at `url` in Chromium, drawn; yields it and the list its failed requests go to."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        # The page forbids eval (its CSP); Playwright's waits evaluate strings.
        page = browser.new_page(viewport={"width": 1400, "height": 900}, bypass_csp=True)
        failures: list[str] = []
        page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        yield page, failures
        browser.close()


@pytest.fixture(scope="module")
def viewer():
    with serving(DLRM) as url:
        yield url


def api(url: str, path: str) -> dict:
    base, token = url.split("/?token=")
    with urllib.request.urlopen(f"{base}{path}{'&' if '?' in path else '?'}token={token}") as r:
        return json.load(r)


def a_kernel(url: str) -> tuple[int, str]:
    """A kernel of rank 0 that the whole job at 16,384 px draws exactly, and its name."""
    lanes = api(url, "/api/lanes")
    for lane in lanes["lanes"]:
        if lane["kind"] != "device":
            continue
        answer = api(url, f"/api/range?t0=0&t1={lanes['end_ns'] + 1}&px=16384&lanes={lane['id']}")
        for row in answer["lanes"][0]["rows"]:
            for ev in row["events"]:
                name = answer["names"][ev[3]]
                if "nccl" not in name.lower():
                    return ev[0], name
    raise AssertionError("no kernel drawn exactly")


def test_a_user_zooms_searches_clicks_follows_and_overlays(viewer):
    kernel, name = a_kernel(viewer)
    failures: list[str] = []
    console: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        # The page forbids eval (its CSP); Playwright's waits evaluate strings, so the test
        # context bypasses the CSP (the browser test of the Rust suite runs under it).
        page = browser.new_page(viewport={"width": 1400, "height": 900}, bypass_csp=True)
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.goto(viewer)
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        status = page.locator("#status")
        assert "8" in page.evaluate("String(new Set(stratoView.state.lanes.map(l => l.rank)).size)")

        # Zoom in with the keyboard, out with ctrl+wheel: the window shrinks, then grows.
        whole = page.evaluate("stratoView.state.t1 - stratoView.state.t0")
        page.locator("#canvas").click(position={"x": 700, "y": 5})
        for _ in range(5):
            page.keyboard.press("w")
        zoomed = page.evaluate("stratoView.state.t1 - stratoView.state.t0")
        assert zoomed < whole * 0.5, (zoomed, whole)
        page.mouse.move(800, 400)
        page.keyboard.down("Control")
        page.mouse.wheel(0, 400)
        page.keyboard.up("Control")
        assert page.evaluate("stratoView.state.t1 - stratoView.state.t0") > zoomed
        page.keyboard.press("0")

        # Search the kernel by name: the view goes to a match and shows its details.
        page.fill("#search", name)
        page.press("#search", "Enter")
        page.wait_for_selector("#event-name", timeout=30_000)
        assert page.inner_text("#event-name") == name

        # Go to our kernel through its link, then click it on the canvas.
        page.evaluate(f"location.hash = 'event={kernel}'")
        page.wait_for_function(f"document.getElementById('details').dataset.event === '{kernel}'", timeout=30_000)
        page.wait_for_function(f"stratoView.eventBox({kernel}) !== null", timeout=30_000)
        # Select something else first, so the click is what brings the kernel back.
        page.evaluate("document.getElementById('details').dataset.event = ''")
        box = page.evaluate(f"stratoView.eventBox({kernel})")
        page.mouse.click(box["x"], box["y"])
        page.wait_for_function(f"document.getElementById('details').dataset.event === '{kernel}'", timeout=30_000)
        details = page.inner_text("#details")
        assert "DeviceKernel" in details, details

        # Follow its launch: the correlated list names the runtime call.
        link = page.locator("#correlated a").first
        launch_name = link.inner_text()
        link.click()
        page.wait_for_function(f"document.getElementById('details').dataset.event !== '{kernel}'", timeout=30_000)
        assert page.inner_text("#event-name") == launch_name
        assert "AcceleratorApi" in page.inner_text("#details")

        # The critical path of the first step, outlined on the timeline.
        page.keyboard.press("0")
        page.check("#cp")
        page.wait_for_selector("#path-title", timeout=60_000)
        page.wait_for_function("Number(document.getElementById('status').dataset.pathDrawn || 0) > 0", timeout=30_000)

        # The collectives: linked across ranks, the last rank marked.
        page.uncheck("#cp")
        page.check("#coll")
        page.wait_for_function("Number(document.getElementById('status').dataset.collectives || 0) > 0", timeout=30_000)

        # The findings, and one of them: the view goes to its evidence.
        page.click("#findings")
        page.wait_for_selector("#findings-list li a", timeout=60_000)
        before = page.evaluate("[stratoView.state.t0, stratoView.state.t1]")
        page.locator("#findings-list li a").first.click()
        page.wait_for_function(f"stratoView.state.t0 !== {before[0]} || stratoView.state.t1 !== {before[1]}", timeout=30_000)

        # Shift-drag a range: its aggregate adds up (the API's rule; here: it is shown).
        page.keyboard.press("0")
        page.mouse.move(500, 300)
        page.keyboard.down("Shift")
        page.mouse.down()
        page.mouse.move(900, 320, steps=5)
        page.mouse.up()
        page.keyboard.up("Shift")
        page.wait_for_selector("#aggregate", timeout=30_000)
        assert "events" in page.inner_text("#details")

        shot = page.screenshot()
        assert len(shot) > 20_000
        browser.close()
    assert not failures, failures
    assert not [c for c in console if c.startswith("error")], console


def fragment(href: str) -> dict[str, str]:
    """The fields of a viewer link's fragment."""
    return dict(urllib.parse.parse_qsl(href.split("#", 1)[1]))


def test_the_reports_links_open_the_viewer_at_their_evidence(viewer):
    """The report the viewer serves (`/report`): an evidence range of a finding opens the
    viewer in a tab of its own, zoomed on the range, the range outlined, its rank's lanes on
    screen and the findings listed; a step's critical path, followed from the report into the
    same tab, is outlined there."""
    base, token = viewer.split("/?token=")
    failures: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        # As above: Playwright's waits evaluate strings, which the pages' policies forbid.
        context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
        context.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        report = context.new_page()
        report.goto(f"{base}/report?token={token}", timeout=180_000)
        # The evidence range on the highest rank: its lanes are below the first screen.
        for d in report.locator("section:has(#findings) details").all():
            d.evaluate("d => d.open = true")
        links = report.locator("section:has(#findings) details a.view")
        ranks = [int(fragment(links.nth(i).get_attribute("href"))["rank"]) for i in range(links.count())]
        assert max(ranks) >= 4, ranks
        evidence = links.nth(ranks.index(max(ranks)))
        want = fragment(evidence.get_attribute("href"))
        a, b = map(int, want["mark"].split(","))
        with context.expect_page() as opened:
            evidence.click()
        view = opened.value
        view.wait_for_selector("body[data-ready='1']", timeout=60_000)
        view.wait_for_selector("#findings-list li", timeout=120_000)
        assert view.evaluate("stratoView.state.marks") == [[a, b]]
        t0, t1 = view.evaluate("[stratoView.state.t0, stratoView.state.t1]")
        assert t0 <= a and b <= t1 and t1 - t0 < view.evaluate("stratoView.state.end"), (t0, t1, a, b)
        # The evidence's rank: its first lane is on screen.
        on_screen = view.evaluate(
            """(rank) => {
                const S = stratoView.state;
                const lane = S.lanes.find((l) => l.rank === rank) || S.lanes.find((l) => l.rank_index === rank);
                const it = S.layout.find((x) => x.kind !== 'group' && x.lane.id === lane.id);
                const h = document.getElementById('canvas').getBoundingClientRect().height;
                return it.y >= S.scrollY && it.y < S.scrollY + h;
            }""",
            int(want["rank"]),
        )
        assert on_screen, want

        # A step's critical path, from the report into the same tab.
        path = report.locator("section:has(#critical-path) details a.view").first
        report.locator("section:has(#critical-path) details").first.evaluate("d => d.open = true")
        step = fragment(path.get_attribute("href"))["path"]
        pages = len(context.pages)
        path.click()
        view.wait_for_function(
            f"(document.getElementById('status').dataset.hash || '').includes('path={step}')", timeout=30_000)
        view.wait_for_selector("#path-title", timeout=120_000)
        assert len(context.pages) == pages, "the link opened another tab"
        assert view.evaluate("document.getElementById('cp').checked")
        assert view.evaluate("document.getElementById('step').value") == step
        view.wait_for_function("Number(document.getElementById('status').dataset.pathDrawn || 0) > 0", timeout=30_000)
        browser.close()
    assert not failures, failures


def test_a_waiting_ranks_path_shows_its_edge_to_the_late_peer(tmp_path):
    """A generated 4-rank job (`benches/job_scale.py`: the DLRM ranks with their clocks moved
    apart) where, in one step, ranks wait at an all-reduce for a late rank: the critical path's
    edge between the ranks is drawn from the late rank's kernel to the waiting rank's, and the
    side panel's line for it goes there; the collectives overlay marks advise's straggler."""
    sys.path.insert(0, str(REPO / "benches"))
    import job_scale

    job_scale.generate(job_scale.load_bases(), 4, 1, str(tmp_path))
    with serving(tmp_path) as url:
        # A step whose path waits for a late peer, as the API gives it.
        step, edge = None, None
        for s in api(url, "/api/steps")["steps"]:
            path = api(url, f"/api/critical-path?step={s['number']}")
            edges = [p for r in path["ranks"] for p in r["late_peers"] if p["from"] and p["to"]]
            if edges:
                step, edge = s["number"], edges[0]
                break
        assert step is not None, "no step of the generated job waits for a late peer"
        assert edge["from"]["lane"] != edge["to"]["lane"]
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900}, bypass_csp=True)
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            page.select_option("#step", str(step))
            page.wait_for_selector("#path-title", timeout=60_000)
            before = page.evaluate("[stratoView.state.t0, stratoView.state.t1]")
            page.locator("#details p.peer").first.click()
            page.wait_for_function(f"stratoView.state.t0 !== {before[0]} || stratoView.state.t1 !== {before[1]}", timeout=30_000)
            page.wait_for_function("Number(document.getElementById('status').dataset.peerEdges || 0) > 0", timeout=30_000)
            assert "waited" in page.inner_text("#details")
            # The collectives overlay marks the straggler advise finds on its rank's groups.
            findings = api(url, "/api/findings")["findings"]
            stragglers = {e["rank"] for f in findings if f["rule"] == "stragglers"
                          for e in f["evidence"] if e["kind"] == "step"}
            assert stragglers, "advise finds no straggler in the generated job"
            page.check("#coll")
            page.wait_for_function(f"Number(document.getElementById('status').dataset.stragglers || 0) === {len(stragglers)}",
                                   timeout=60_000)
            browser.close()


def test_a_baseline_is_shown_under_the_run_with_the_diff():
    """`strato view RUN --baseline OTHER` on two ranks of the DLRM job as two runs: the baseline's
    lanes are drawn under the run's, the diff button lists `strato diff`'s operations and one
    of them is searched for from there; the report served then has the diff section."""
    files = sorted(DLRM.iterdir())
    with serving(files[0], "--baseline", str(files[1])) as url:
        lanes = api(url, "/api/lanes")
        assert lanes["baseline"]["aligned_step"] is not None, lanes["baseline"]
        with page_at(url) as (page, failures):
            groups = page.evaluate("stratoView.state.layout.filter((x) => x.kind === 'group').map((x) => x.key)")
            baseline = [g for g in groups if g.startswith("baseline")]
            assert baseline and not groups[0].startswith("baseline"), groups
            assert groups.index(baseline[0]) == len(groups) - len(baseline), groups
            page.click("#diff")
            page.wait_for_selector("#diff-operations a", timeout=60_000)
            assert int(page.evaluate("document.getElementById('details').dataset.diff")) > 0
            assert "against the baseline" in page.inner_text("#diff-title")
            name = page.locator("#diff-operations a").first
            text = name.inner_text()
            name.click()
            page.wait_for_selector("#event-name", timeout=30_000)
            assert text.lower() in page.inner_text("#event-name").lower()
            base, token = url.split("/?token=")
            page.goto(f"{base}/report?token={token}", timeout=180_000)
            assert page.locator("section:has(#diff)").count() == 1
        assert not failures, failures


def test_a_graph_launch_lists_its_replayed_kernels_under_their_capture():
    """vLLM decode replayed as one HIP graph, viewed with its capture trace (`--graph-capture`):
    the graph launch's details list the kernels it replayed; one of them leads, through its
    `graph_node` flow, to its captured launch on the graph-capture lane, with the ops that
    captured it."""
    traces = DLRM.parent / "tracelens"
    with serving(traces / "vllm_decode_full_graph_execution.json.gz",
                 "--graph-capture", str(traces / "vllm_decode_full_graph_capture_rank_0.pt.trace.json.gz")) as url:
        with page_at(url) as (page, failures):
            page.fill("#search", "GraphLaunch")
            page.press("#search", "Enter")
            page.wait_for_selector("#replayed li a", timeout=30_000)
            # The 421 kernels of the graph (docs/analyses/graphs.md), not the trace's 13 copies
            # launched by calls of their own.
            assert "(421)" in page.inner_text("#details"), page.inner_text("#details")
            assert page.locator("#replayed li a").count() == 421
            launch = page.evaluate("document.getElementById('details').dataset.event")
            page.locator("#replayed li a").first.click()
            page.wait_for_function(f"document.getElementById('details').dataset.event !== '{launch}'", timeout=30_000)
            kernel = page.evaluate("document.getElementById('details').dataset.event")
            node = page.locator("#flows li", has_text="graph_node")
            assert node.count() == 1, page.inner_text("#flows")
            node.locator("a").first.click()
            page.wait_for_function(f"document.getElementById('details').dataset.event !== '{kernel}'", timeout=30_000)
            lane = page.evaluate("stratoView.state.laneById.get(stratoView.state.details.lane).name")
            assert lane.startswith("graph capture"), lane
        assert not failures, failures

"""Type stub of ``stratoscope._analysis``: the analysis API (docs/python-api.md).

``open(...)`` returns a :class:`Profile`; every analysis method returns a :class:`Table`, an
Arrow table exported through the Arrow PyCapsule interface (``pyarrow.table(t)``,
``polars.from_arrow(t)``, ``t.to_pandas()``). Each method's columns are the fields of the
named ``strato <command> --json`` list (nested objects flattened as ``outer.inner``; nested
lists in their own methods), with the command's defaults.

Errors: every exception derives from :class:`StratoscopeError`; messages name the file.
"""

from os import PathLike
from typing import Any, Sequence

_Path = str | PathLike[str]

class StratoscopeError(Exception):
    """Base class of stratoscope's analysis errors."""

class InputNotFound(StratoscopeError):
    """An input path does not exist."""

class TraceFormatError(StratoscopeError):
    """An input is not a readable trace (invalid JSON, corrupt gzip, unknown format, an
    invalid trace, SQLite / CSV / protobuf errors)."""

class ProfileStoreError(StratoscopeError):
    """A profile directory cannot be read (damaged, or a newer schema)."""

class MemoryBudgetError(StratoscopeError):
    """The import would pass the memory budget (``STRATO_MEMORY_BUDGET``)."""

class InvalidOption(StratoscopeError):
    """An option or setting is invalid (level map, memory budget variable, graph capture
    trace without captured launches, an analysis option out of range)."""

class AnalysisError(StratoscopeError):
    """An analysis cannot run on this profile (e.g. a cycle in the critical-path graph)."""

class ReadError(StratoscopeError):
    """Reading an input failed (an I/O error other than a missing path)."""

class Table:
    """One result as an Arrow table (one record batch)."""

    @property
    def name(self) -> str: ...
    @property
    def num_rows(self) -> int: ...
    @property
    def column_names(self) -> list[str]: ...
    @property
    def svg(self) -> str | None:
        """The report's SVG plot of the result, when it has one."""
    def __len__(self) -> int: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def to_pyarrow(self) -> Any:
        """A ``pyarrow.Table`` (zero-copy)."""
    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` (through pyarrow)."""
    def to_polars(self) -> Any:
        """A ``polars.DataFrame`` (zero-copy)."""
    def _repr_html_(self) -> str: ...

class Profile:
    """A profile opened for analysis."""

    @property
    def label(self) -> str: ...
    @property
    def corrected(self) -> bool:
        """Whether a recording's calibration was applied (overhead-corrected)."""
    @property
    def warnings(self) -> list[str]:
        """What opening the profile told (the `strato` command's stderr lines: import
        warnings, notes on rank claims and graph attribution); each was also issued as a
        `UserWarning` by `open`."""
    @property
    def rank_count(self) -> int: ...
    @property
    def span_count(self) -> int: ...

    # Analyses (each: the rows of one list of `strato <command> --json`). The registered
    # analyses (`stratoscope.analyses()`) are reached by name through `analysis()` and as
    # `profile.NAME(**options)` / `profile.TABLE(**options)`; their signatures are listed here.
    def gpu_time(self, *, window: str = "whole", kernel_wait_us: float = 30.0) -> Table:
        """Registered `gpu-time`, table `gpu_time`: one row per rank (scalar fields of
        `ranks[]`, with `window`)."""
    def gpu_time_streams(self, *, window: str = "whole", kernel_wait_us: float = 30.0) -> Table:
        """Registered `gpu-time`, table `gpu_time_streams`: `ranks[].streams[]` with `rank`."""
    def gpu_time_exposure(self, *, window: str = "whole", kernel_wait_us: float = 30.0) -> Table:
        """Registered `gpu-time`, table `gpu_time_exposure`: `ranks[].exposure[]` with
        `rank`."""
    def breakdown(self, *, per_step: bool = False, top: int = 12) -> Table:
        """Registered `breakdown`, table `breakdown`: `processes[].rows[]` with `rank` and
        `pid` (`top` shapes the command's text only)."""
    def breakdown_processes(self, *, per_step: bool = False, top: int = 12) -> Table:
        """Registered `breakdown`, table `breakdown_processes`: `processes[]`."""
    def operations(self, *, per_step: bool = False, top: int = 12) -> Table:
        """Registered `breakdown`, table `operations`: `processes[].operations[]` with
        `rank` and `pid`."""
    def transitions(self, *, per_step: bool = False, top: int = 12) -> Table:
        """Registered `breakdown`, table `transitions`: `processes[].transitions[]` with
        `rank` and `pid`."""
    def hierarchy(self) -> Table:
        """Registered `hierarchy`, table `hierarchy`: `ranks[]`."""
    def tree_links(self, *, at: str | int = "", kernel: str = "", limit: int = 8) -> Table:
        """Registered `tree`, table `tree_links`: one row per link of `chains[][]`, with the
        chain's number `chain` (from 0) and `what`."""
    def kernels(self, *, top: int = 20) -> Table:
        """Registered `kernels`, table `kernel_stats`: `ranks[].kernels[]` with `rank` (one
        row per (rank, kernel name); past `top`, one `(other N)` row; 0: all)."""
    def kernel_ops(self, *, top: int = 20) -> Table:
        """Registered `kernels`, table `kernel_ops`: `ranks[].ops[]` with `rank`."""
    def kernel_latencies(self, *, top: int = 20) -> Table:
        """Registered `kernels`, table `kernel_latencies`: `ranks[]` (device ops, time,
        launch/queue/submit latencies)."""
    def memory(self, *, top: int = 20, max_points: int = 512, bins: int = 50) -> Table:
        """Registered `memory`, table `memory`: `devices[]`."""
    def memory_copies(self, *, top: int = 20, max_points: int = 512, bins: int = 50) -> Table:
        """Registered `memory`, table `memory_copies`: `copies[]`."""
    def layers(self, *, by: str = "op", trim: float = 0.1, batch_size: int | None = None) -> Table:
        """`strato layers --by op|annotation`: `layers[]`."""
    def layer_kernels(self, *, by: str = "op", trim: float = 0.1,
                      batch_size: int | None = None) -> Table:
        """`strato layers`: `kernels[]`."""
    def modules(self) -> Table:
        """`strato layers --by module`: `modules[]`."""
    def iterations(self, *, iterations: Sequence[int] | None = None, k0: int | None = None,
                   epsilon: int | None = None, max_loops: int = 3) -> Table:
        """`strato iterations`: `sequences[].iterations[]` with the sequence's rank, pid,
        device, stream and loop."""
    def iteration_loops(self, *, iterations: Sequence[int] | None = None, k0: int | None = None,
                        epsilon: int | None = None, max_loops: int = 3) -> Table:
        """`strato iterations`: `sequences[]`."""
    def collectives(self, *, stragglers: int = 5) -> Table:
        """`strato collectives`: `collectives[]`."""
    def collectives_ranks(self, *, stragglers: int = 5) -> Table:
        """`strato collectives`: `ranks[]`."""
    def stragglers(self, *, stragglers: int = 5) -> Table:
        """`strato collectives`: `stragglers[]`."""
    def critical_path(self, *, top: int = 10, step: str | int = "") -> Table:
        """Registered `critical-path`, table `critical_path`: `ranks[]` (`by_kind.<kind>`
        columns; the whole trace's path, empty with `step`)."""
    def critical_path_events(self, *, top: int = 10, step: str | int = "") -> Table:
        """Registered `critical-path`, table `critical_path_events`: `ranks[].events[]`."""
    def critical_path_steps(self, *, top: int = 10, step: str | int = "all") -> Table:
        """Registered `critical-path`, table `critical_path_steps`: `steps[].ranks[]` with
        `step` and `number` (each rank's path inside its ProfilerStep#N window, `window.*`
        columns): every step, or `step=N`'s (the table implies `step="all"`)."""
    def whatif(self, *, scale: Sequence[str] = (), no_sync: str = "",
               async_copies: str = "", even_straggler: bool = False, link_bw: float | None = None,
               overlap_comm: bool = False, overlap_copies: bool = False, graph_launch: str = "",
               across_steps: bool = False, step: str | int = "") -> Table:
        """Registered `whatif`, table `whatif`: `whatif.steps[]`, one row per (step, rank)
        with `scale` (changes `KIND:NAME=F`: `kernel:TEXT`, `op:NAME`, `module:CLASS`,
        `cpu:NAME`, `thread:NAME`, `category:kernel|copy|device`), `no_sync` (`all`, or a CPU op's name: its host
        synchronisations no longer wait), `async_copies` (`all`, or a CPU op's name: the
        blocking calls that launched a copy no longer wait for it), `even_straggler` (each
        window's straggler
        arrives at its collectives with the median member), `link_bw` (the links F times
        as fast: each collective's transfer in 1/F of the time) and `overlap_comm`
        (collectives no longer wait on the device for compute, nor compute for them on a
        shared stream), `overlap_copies` (host-to-device copies no longer wait on the device for
        compute nor compute for them; compute no longer waits for a device-to-host copy) and
        `graph_launch` (`all`, or a CPU op's name: its launches replayed as
        one CUDA graph launch, its host work gone); `across_steps` reads the steps from
        one simulation of the whole trace (a step from the previous step's end to its own,
        so a change carries into the next step): baseline (the replay) and
        predicted step time, gain, the predicted path (`path.by_kind.<kind>` columns,
        `path.bottleneck.*`)."""
    def whatif_replay(self, *, scale: Sequence[str] = (), no_sync: str = "",
                      async_copies: str = "", even_straggler: bool = False, link_bw: float | None = None,
                      overlap_comm: bool = False, overlap_copies: bool = False, graph_launch: str = "",
                      across_steps: bool = False, step: str | int = "") -> Table:
        """Registered `whatif`, table `whatif_replay`: `replay.steps[]`, one row per (step,
        rank): measured and simulated step time, `error_pct`, and what the end waited on
        (`path.by_kind.<kind>`, `path.bottleneck.*`)."""
    def info(self) -> Table:
        """Registered `info`, table `info`: one row (time span, event counts,
        `spans_by_level.<level>`, `events_by_category.<category>`)."""
    def info_sources(self) -> Table:
        """Registered `info`, table `info_sources`: `sources[]`."""
    def info_processes(self) -> Table:
        """Registered `info`, table `info_processes`: `processes[]`."""
    def info_devices(self) -> Table:
        """Registered `info`, table `info_devices`: `devices[]`."""
    def advise(self, *, rules: _Path | None = None, disable: Sequence[str] = (),
               floor: float | None = None, all: bool = False) -> Table:
        """Registered `advise`, table `findings`: `findings[]` (`rules`: a rules file's path;
        `disable`: rule ids; `floor`: percent of the window, default the rules file's or 1)."""
    def findings(self, *, rules: _Path | None = None, disable: Sequence[str] = (),
                 floor: float | None = None, all: bool = False) -> Table:
        """Registered `advise`, table `findings`: `findings[]`."""
    def findings_evidence(self, *, rules: _Path | None = None, disable: Sequence[str] = (),
                          floor: float | None = None, all: bool = False) -> Table:
        """Registered `advise`, table `findings_evidence`: `findings[].evidence[]` with
        `rule`."""
    def advise_steps(self, *, rules: _Path | None = None, disable: Sequence[str] = (),
                     floor: float | None = None, all: bool = False) -> Table:
        """Registered `advise`, table `advise_steps`: `steps[]`."""
    def advise_rules(self, *, rules: _Path | None = None, disable: Sequence[str] = (),
                     floor: float | None = None, all: bool = False) -> Table:
        """Registered `advise`, table `advise_rules`: `rules[]`."""
    def diff(self, other: "Profile", *, per_step: bool = False) -> Table:
        """`strato diff SELF OTHER`: `operations[]` (`compare("diff", other)`)."""
    def diff_kernels(self, other: "Profile", *, per_step: bool = False) -> Table:
        """`strato diff SELF OTHER`: `kernels[]` (`compare("diff", other,
        table="diff_kernels")`)."""

    # Registered comparisons (`comparisons()` lists them; strato_engine::comparisons).
    def compare(self, name: str, other: "Profile", *, table: str | None = None,
                **options: Any) -> Table:
        """A registered comparison of this profile (A, the baseline) with `other` (B), by
        name (`strato NAME SELF OTHER --json`'s fields as columns): `table` (its main table,
        or the first its options allow, when None), options as keywords
        (`compare("diff", other, by_op=True)` gives `diff_ops`)."""

    # Registered analyses (`analyses()` lists them; strato_engine::registry).
    def analysis(self, name: str, *, table: str | None = None, **options: Any) -> Table:
        """A registered analysis by name (`strato NAME --json`'s fields as columns): `table`
        (its main table when None), options as keywords."""
    def __getattr__(self, name: str) -> Any:
        """`profile.NAME(**options)` for any registered analysis NAME (its main table), and
        `profile.TABLE(**options)` for any table of one."""

    # The trace's own tables.
    def spans(self, *, args: bool = False) -> Table: ...
    def flows(self) -> Table: ...
    def counters(self) -> Table: ...
    def tracks(self) -> Table: ...
    def ranks(self) -> Table: ...
    def _repr_html_(self) -> str: ...

def analyses() -> list[dict[str, Any]]:
    """The registered analyses: name, method, summary, window, doc, options
    (name, help, default), tables (name, about, path, inherit: where the rows are in
    `strato NAME --json`)."""

def comparisons() -> list[dict[str, Any]]:
    """The registered comparisons of two profiles, described as `analyses()` describes
    analyses (`Profile.compare(name, other)` runs one)."""

def open(*paths: _Path, level_map: _Path | None = None, salvage: bool = False,
         keep_secrets: bool = False, graph_capture: _Path | None = None) -> Profile:
    """Opens trace files, a directory of ranks, a profile directory or a recording, as the
    `strato` command's inputs (and its `--level-map`, `--salvage`, `--keep-secrets`,
    `--graph-capture` options) do."""

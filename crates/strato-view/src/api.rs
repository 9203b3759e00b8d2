//! The answers of `strato view`'s HTTP API, as JSON values: the lanes, what a window shows,
//! one event's details, search, and a range's aggregate.
//!
//! **Times.** Every time in a request or an answer is in nanoseconds since the view's origin
//! (`origin_ns` in `/api/lanes`, the trace's first event, given as a string): absolute Kineto
//! times (~1.7e18 ns) do not fit in a JavaScript number (exact to 2^53 ~ 9e15), offsets do
//! for any job shorter than 104 days.
//!
//! Requests are checked here ([`ApiError`] is a 400 or a 404 with one line saying what is
//! wrong); nothing a request holds reaches the file system.

use std::collections::HashMap;

use serde_json::{json, Value};
use strato_analysis::palette;
use strato_trace::{Level, Ns, SpanId, Trace};

pub use crate::align::{align_baseline, Alignment};
use crate::overlays::{steps_json, Overlays};
use crate::timeline::{CounterView, InstantView, Timeline, Window, MAX_PX};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::compare::registration::{Diff, DiffOutput, DiffSettings, DiffSides};
use strato_analysis::registry::Comparison;

/// A request the API refuses: the HTTP status and one line saying why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    fn bad(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
        }
    }

    fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 404,
            message: message.into(),
        }
    }
}

/// How many names an aggregate lists before "others".
pub const AGGREGATE_NAMES: usize = 50;

/// How many collectives one window's answer lists.
pub const COLLECTIVES_LIMIT: usize = 2_000;

/// How many device ops a graph launch's details list (`replayed`).
pub const REPLAYED_LIMIT: usize = 1_024;

/// How many spans sharing a correlation id an event's details list.
pub const CORRELATED_LIMIT: usize = 64;

/// A trace and its timeline index, answering the API.
#[derive(Debug)]
pub struct Api {
    trace: Trace,
    timeline: Timeline,
    origin: Ns,
    /// `(span, flow)` for both ends of every flow bound to a span, sorted.
    flows_of: Vec<(u32, u32)>,
    /// `(correlation, span)`, sorted.
    by_correlation: Vec<(u64, u32)>,
    /// The shift each track's times were moved by onto the job's clock (empty: none moved).
    clock_shifts: Vec<Ns>,
    overlays: Overlays,
    /// What the report served at `/report` is titled (the inputs' names).
    title: String,
    /// The run alone, when a baseline is shown beside it (`trace` then holds both): what the
    /// overlays, the report and the diff analyse. The analyses are of the run, not of the two
    /// runs taken as one job.
    run: Option<Trace>,
    baseline: Option<Baseline>,
}

/// A second run shown under the first (`strato view PATH --baseline OTHER`): its ranks come
/// after the run's in the trace, its times moved step by step so that each of its steps starts
/// with the run's step of the same number ([`align_baseline`]).
#[derive(Debug)]
struct Baseline {
    /// What the baseline is called (its inputs' names).
    label: String,
    /// The trace's first rank index that is the baseline's.
    first_rank: u32,
    /// The trace's first span index that is the baseline's.
    first_span: usize,
    /// How its times were moved to line up with the run's.
    alignment: Alignment,
    /// Each of its spans' stretch of the alignment (indexed from [`Baseline::first_span`]), whose
    /// shift moved it; its move onto its own job clock is its track's.
    span_stretches: Vec<u32>,
    /// The baseline's side of `strato diff` (computed before the baseline joined the trace).
    side: Result<DiffSides, String>,
    diff: std::sync::OnceLock<Result<Value, String>>,
}

/// Operations and kernels `/api/diff` lists (largest change first), of each.
pub const DIFF_ROWS: usize = 200;

/// The parameters of a request, by name (the query string decoded).
pub type Params = HashMap<String, String>;

impl Api {
    /// Indexes `trace` for viewing, every rank on the job's one clock
    /// ([`crate::overlays::job_clock_shifts`]: the ranks of a job recorded on different hosts
    /// line up at their collectives, as every cross-rank analysis aligns them).
    pub fn new(trace: Trace) -> Api {
        Api::build(trace, None)
    }

    /// [`Api::new`] with a second run, `baseline` (called `label`), shown under it: each run on
    /// its own job clock, the baseline's times moved so that its steps start with the run's
    /// ([`align_baseline`]), its lanes stacked under the run's lanes of the same rank
    /// ([`Timeline::stack_baseline`]). The overlays, the report and `/api/diff` analyse the run
    /// alone, which is kept for them beside the two runs' trace (the run's events are held
    /// twice).
    pub fn with_baseline(trace: Trace, baseline: Trace, label: String) -> Api {
        Api::build(trace, Some((baseline, label)))
    }

    fn build(mut trace: Trace, baseline: Option<(Trace, String)>) -> Api {
        let mut shifts = crate::overlays::job_clock_shifts(&trace);
        crate::overlays::onto_job_clock(&mut trace, &shifts);
        let mut run = None;
        let mut paired = None;
        if let Some((mut other, label)) = baseline {
            let own = crate::overlays::job_clock_shifts(&other);
            crate::overlays::onto_job_clock(&mut other, &own);
            let side = Diff::side(&Analyzed::new(&other), &DiffSettings::default())
                .map_err(|e| e.to_string());
            let alignment = align_baseline(&trace, &other);
            let span_stretches = alignment.apply(&mut other);
            // Each track's move onto its job's clock: the run's, then the baseline's (its
            // events then move by their step's alignment too).
            shifts.resize(trace.tracks.len(), 0);
            shifts.extend((0..other.tracks.len()).map(|t| own.get(t).copied().unwrap_or(0)));
            let (first_rank, first_span) = (trace.ranks.len() as u32, trace.spans.len());
            run = Some(trace.clone());
            trace.append(other);
            paired = Some(Baseline {
                label,
                first_rank,
                first_span,
                alignment,
                span_stretches,
                side,
                diff: std::sync::OnceLock::new(),
            });
        }
        let mut timeline = Timeline::new(&trace);
        if let Some(b) = &paired {
            timeline.stack_baseline(&trace, b.first_rank);
        }
        timeline.set_clock_shifts(&shifts);
        let origin = timeline.extent().0;
        let mut flows_of = Vec::new();
        for (i, f) in trace.flows.iter().enumerate() {
            for end in [&f.from, &f.to].into_iter().flatten() {
                if let Some(span) = end.span {
                    flows_of.push((span.0, i as u32));
                }
            }
        }
        flows_of.sort_unstable();
        flows_of.dedup();
        let mut by_correlation: Vec<(u64, u32)> = trace
            .spans
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.correlation.get().map(|c| (c, i as u32)))
            .collect();
        by_correlation.sort_unstable();
        Api {
            trace,
            timeline,
            origin,
            flows_of,
            by_correlation,
            clock_shifts: shifts,
            overlays: Overlays::default(),
            title: "strato view".to_owned(),
            run,
            baseline: paired,
        }
    }

    /// The trace the overlays analyse: the run alone (without its baseline).
    fn analysed(&self) -> &Trace {
        self.run.as_ref().unwrap_or(&self.trace)
    }

    /// `GET /api/diff`: `strato diff BASELINE RUN`'s numbers (the baseline is A, the run B:
    /// a delta is the run's time minus the baseline's), with at most [`DIFF_ROWS`] operations
    /// and kernels, largest change first (`operations_total`, `kernels_total` count them all).
    /// 404 without a baseline.
    pub fn diff(&self) -> Result<Value, ApiError> {
        let b = self.baseline.as_ref().ok_or_else(|| {
            ApiError::not_found("no baseline: strato view PATH --baseline OTHER shows one")
        })?;
        b.diff
            .get_or_init(|| {
                let settings = DiffSettings::default();
                let before = b.side.as_ref().map_err(Clone::clone)?;
                let after = Diff::side(&Analyzed::new(self.analysed()), &settings)
                    .map_err(|e| e.to_string())?;
                let report = match Diff::compare(&b.label, before, &self.title, &after, &settings) {
                    Ok(DiffOutput::Runs(report)) => report,
                    Ok(DiffOutput::ByOp(_)) => return Err("not a diff of runs".to_owned()),
                    Err(e) => return Err(e.to_string()),
                };
                let mut value = serde_json::to_value(&report).map_err(|e| e.to_string())?;
                for (list, total) in [
                    ("operations", "operations_total"),
                    ("kernels", "kernels_total"),
                ] {
                    if let Some(items) = value.get_mut(list).and_then(Value::as_array_mut) {
                        let n = items.len();
                        items.truncate(DIFF_ROWS);
                        value[total] = json!(n);
                    }
                }
                value.as_object_mut().map(|o| o.remove("strata"));
                Ok(value)
            })
            .clone()
            .map_err(|e| ApiError {
                status: 422,
                message: format!("diff: {e}"),
            })
    }

    /// Titles the report served at `/report` (the inputs' names, as `strato report` titles
    /// it).
    pub fn titled(mut self, title: String) -> Api {
        self.title = title;
        self
    }

    /// `GET /report`: the HTML report of the trace viewed ([`Overlays::report`]), its sections
    /// linking to `page` (the viewer's page with its query, `/?token=T`) at their evidence,
    /// times since the view's origin.
    pub fn report(&self, page: &str) -> &str {
        let viewer = strato_report::ViewerLinks {
            page: page.to_owned(),
            origin_ns: self.origin,
        };
        let baseline = self
            .baseline
            .as_ref()
            .map(|b| (b.label.as_str(), b.side.as_ref().ok()));
        self.overlays
            .report(self.analysed(), &self.title, viewer, baseline)
    }

    /// The trace viewed.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The timeline index.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// `GET /api/lanes`: the extent, the ranks, the lanes in display order, the levels and
    /// their colours.
    pub fn lanes(&self) -> Value {
        let (start, end) = self.timeline.extent();
        let mut ranks: Vec<Value> = self
            .trace
            .ranks
            .iter()
            .enumerate()
            .map(|(i, r)| json!({"index": i, "rank": r.rank, "source": r.source}))
            .collect();
        let mut lanes = serde_json::to_value(self.timeline.lanes()).unwrap_or(json!([]));
        // A baseline's ranks and lanes say so.
        if let Some(b) = &self.baseline {
            let ranks = ranks.iter_mut().skip(b.first_rank as usize);
            let lanes = lanes.as_array_mut().into_iter().flatten().filter(|lane| {
                lane["rank_index"]
                    .as_u64()
                    .is_some_and(|r| r >= u64::from(b.first_rank))
            });
            for item in ranks.chain(lanes) {
                item["baseline"] = json!(true);
            }
        }
        let baseline = self.baseline.as_ref().map(|b| {
            let (least, most) = b.alignment.shift_range();
            json!({
                "label": b.label,
                "first_rank_index": b.first_rank,
                "shift_ns": b.alignment.first_shift(),
                "shift_range_ns": [least, most],
                "aligned_step": b.alignment.first_step,
                "steps_aligned": b.alignment.steps,
                "aligned_on": b.alignment.aligned_on,
            })
        });
        json!({
            "baseline": baseline,
            "origin_ns": start.to_string(),
            "start_ns": 0,
            "end_ns": end - start,
            "ranks": ranks,
            "lanes": lanes,
            "levels": Level::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
            // Each level's colour, as the report draws it (`strato_analysis::palette`).
            "level_colours": Level::ALL.iter().map(|&l| palette::level(l)).collect::<Vec<_>>(),
            "events": self.trace.spans.len() + self.trace.instants.len() + self.trace.counters.len(),
        })
    }

    /// `GET /api/range?t0=&t1=&px=&lanes=`: what the lanes show in `[t0, t1)` at `px` pixels
    /// (the level of detail of [`crate::timeline`]). `lanes` is a comma-separated list of lane
    /// ids (all lanes when absent).
    pub fn range(&self, params: &Params) -> Result<Value, ApiError> {
        let (t0, t1) = self.window_of(params)?;
        let px = match params.get("px") {
            None => 1000,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|&px| (1..=MAX_PX).contains(&px))
                .ok_or_else(|| {
                    ApiError::bad(format!(
                        "px: a whole number of pixels from 1 to {MAX_PX}, not {text:?}"
                    ))
                })?,
        };
        let lanes = self.lanes_of(params)?;
        let window = Window {
            t0: t0 + self.origin,
            t1: t1 + self.origin,
            px,
        };
        let mut names = Names::default();
        let mut out = Vec::with_capacity(lanes.len());
        for lane in lanes {
            let view = self.timeline.view(lane, window);
            let rows: Vec<Value> = view
                .rows
                .iter()
                .map(|row| {
                    let events: Vec<Value> = row
                        .exact
                        .iter()
                        .map(|e| {
                            let s = &self.trace.spans[e.span.0 as usize];
                            json!([
                                e.span.0,
                                e.start - self.origin,
                                e.end - self.origin,
                                names.id(&self.trace, s.name),
                                level_index(s.level)
                            ])
                        })
                        .collect();
                    let buckets: Vec<Value> = row
                        .buckets
                        .iter()
                        .map(|b| json!([b.index, b.count, clamp_i64(b.busy_ns)]))
                        .collect();
                    json!({"row": row.row, "events": events, "buckets": buckets})
                })
                .collect();
            let mut lane_json = json!({"id": lane, "rows": rows});
            match view.counters {
                Some(CounterView::Exact(samples)) => {
                    let samples: Vec<Value> = samples
                        .iter()
                        .map(|(t, v)| json!([t - self.origin, finite(*v)]))
                        .collect();
                    lane_json["counters"] = json!({ "exact": samples });
                }
                Some(CounterView::Buckets(buckets)) => {
                    let buckets: Vec<Value> = buckets
                        .iter()
                        .map(|(k, lo, hi, last)| {
                            json!([k, finite(*lo), finite(*hi), finite(*last)])
                        })
                        .collect();
                    lane_json["counters"] = json!({ "buckets": buckets });
                }
                None => {}
            }
            match view.instants {
                Some(InstantView::Exact(instants)) => {
                    let instants: Vec<Value> = instants
                        .iter()
                        .map(|(t, i)| {
                            let name = self.trace.instants[*i as usize].name;
                            json!([t - self.origin, i, names.id(&self.trace, name)])
                        })
                        .collect();
                    lane_json["instants"] = json!({ "exact": instants });
                }
                Some(InstantView::Buckets(buckets)) => {
                    lane_json["instants"] = json!({ "buckets": buckets });
                }
                None => {}
            }
            out.push(lane_json);
        }
        Ok(json!({
            "t0": t0,
            "t1": t1,
            "px": px,
            "bucket_ns": window.bucket_ns(),
            "names": names.texts,
            "lanes": out,
        }))
    }

    /// `GET /api/event/ID`: one span's details: name, category, level, times, lane and row,
    /// attributes, the chain of spans enclosing it on its lane, its flows (with both ends),
    /// and the spans sharing its correlation id on its rank (its launch, its kernels).
    pub fn event(&self, id: &str) -> Result<Value, ApiError> {
        let index: u32 = id
            .parse()
            .map_err(|_| ApiError::bad(format!("event id: a whole number, not {id:?}")))?;
        let span = self
            .trace
            .spans
            .get(index as usize)
            .ok_or_else(|| ApiError::not_found(format!("no event {index}")))?;
        let args: Value = match span.args.and_then(|a| self.trace.args.get(a.0 as usize)) {
            Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text.to_string())),
            None => Value::Null,
        };
        let chain: Vec<Value> = self
            .timeline
            .enclosing(&self.trace, SpanId(index))
            .into_iter()
            .map(|i| self.summary(i))
            .collect();
        let lo = self.flows_of.partition_point(|&(s, _)| s < index);
        let flows: Vec<Value> = self.flows_of[lo..]
            .iter()
            .take_while(|&&(s, _)| s == index)
            .map(|&(_, f)| {
                let flow = &self.trace.flows[f as usize];
                let end = |e: &Option<strato_trace::FlowEnd>| match e {
                    Some(e) => json!({
                        "lane": e.track.0,
                        "ts": e.ts - self.origin,
                        "event": e.span.map(|s| self.summary(s.0)),
                    }),
                    None => Value::Null,
                };
                json!({
                    "id": flow.id,
                    "category": self.trace.str(flow.category),
                    "from": end(&flow.from),
                    "to": end(&flow.to),
                })
            })
            .collect();
        let mut correlated = Vec::new();
        if let Some(c) = span.correlation.get() {
            let rank = self.trace.tracks[span.track.0 as usize].rank;
            let lo = self.by_correlation.partition_point(|&(k, _)| k < c);
            for &(_, other) in self.by_correlation[lo..]
                .iter()
                .take_while(|&&(k, _)| k == c)
            {
                let o = &self.trace.spans[other as usize];
                if other != index && self.trace.tracks[o.track.0 as usize].rank == rank {
                    correlated.push(self.summary(other));
                    if correlated.len() == CORRELATED_LIMIT {
                        break;
                    }
                }
            }
        }
        let mut out = self.summary(index);
        if let Some((replayed, total)) = self.replayed_by(index) {
            out["replayed"] = Value::Array(replayed);
            out["replayed_total"] = json!(total);
        }
        out["category"] = json!(self.trace.str(span.category));
        out["duration_ns"] = json!(span.duration());
        out["correlation"] = json!(span.correlation);
        out["external_id"] = json!(span.external_id);
        out["args"] = args;
        // Its rank's move onto the job's clock, and a baseline's step lined up with the run's:
        // the recorded start is `start - shift`.
        let aligned = self.baseline.as_ref().and_then(|b| {
            (index as usize)
                .checked_sub(b.first_span)
                .and_then(|i| b.span_stretches.get(i))
                .map(|&k| b.alignment.stretches[k as usize].1)
        });
        let shift = self
            .clock_shifts
            .get(span.track.0 as usize)
            .copied()
            .unwrap_or(0)
            + aligned.unwrap_or(0);
        if shift != 0 {
            out["clock_shift_ns"] = json!(shift);
        }
        if let Some(aligned) = aligned {
            out["aligned_shift_ns"] = json!(aligned);
        }
        out["chain"] = Value::Array(chain);
        out["flows"] = Value::Array(flows);
        out["correlated"] = Value::Array(correlated);
        Ok(out)
    }

    /// `GET /api/search?q=&from=&dir=next|prev`: the first span after (or before) time `from`
    /// whose name holds `q` (case-insensitive), in order of start; ties by id.
    pub fn search(&self, params: &Params) -> Result<Value, ApiError> {
        let query = params
            .get("q")
            .map(|q| q.to_lowercase())
            .filter(|q| !q.is_empty())
            .ok_or_else(|| ApiError::bad("q: what to search for (not empty)"))?;
        let from = match params.get("from") {
            Some(text) => parse_time("from", text)? + self.origin,
            None => Ns::MIN,
        };
        let backwards = match params.get("dir").map(String::as_str) {
            None | Some("next") => false,
            Some("prev") => true,
            Some(other) => return Err(ApiError::bad(format!("dir: next or prev, not {other:?}"))),
        };
        let matching: Vec<bool> = {
            let mut m = vec![false; self.trace.strings.len()];
            for (id, text) in self.trace.strings.iter() {
                if text.to_lowercase().contains(&query) {
                    m[id.0 as usize] = true;
                }
            }
            m
        };
        let order = self.timeline.spans_by_start();
        let start_of = |i: u32| self.trace.spans[i as usize].start;
        let hit = |&&i: &&u32| matching[self.trace.spans[i as usize].name.0 as usize];
        let found = if backwards {
            let end = order.partition_point(|&i| start_of(i) < from);
            order[..end].iter().rev().find(hit)
        } else {
            let begin = order.partition_point(|&i| start_of(i) <= from);
            order[begin..].iter().find(hit)
        };
        Ok(json!({ "found": found.map(|&i| self.summary(i)) }))
    }

    /// `GET /api/aggregate?t0=&t1=&lanes=`: the spans of the lanes that overlap `[t0, t1)`:
    /// how many, their time inside the range, and the same by name (the
    /// [`AGGREGATE_NAMES`] longest, then the rest as `others`). The parts add up to the total.
    pub fn aggregate(&self, params: &Params) -> Result<Value, ApiError> {
        let (t0, t1) = self.window_of(params)?;
        let lanes = self.lanes_of(params)?;
        let (a, b) = (t0 + self.origin, t1 + self.origin);
        let mut by_name: HashMap<u32, (u64, i128)> = HashMap::new();
        let (mut count, mut total) = (0u64, 0i128);
        for lane in lanes {
            self.timeline.overlapping(lane, a, b, |span, start, end| {
                let inside = i128::from(end.min(b) - start.max(a)).max(0);
                let name = self.trace.spans[span as usize].name.0;
                let entry = by_name.entry(name).or_default();
                entry.0 += 1;
                entry.1 += inside;
                count += 1;
                total += inside;
            });
        }
        let mut names: Vec<(u32, u64, i128)> =
            by_name.into_iter().map(|(n, (c, t))| (n, c, t)).collect();
        names.sort_by(|x, y| y.2.cmp(&x.2).then(y.1.cmp(&x.1)).then(x.0.cmp(&y.0)));
        let rest = names.split_off(names.len().min(AGGREGATE_NAMES));
        let listed: Vec<Value> = names
            .iter()
            .map(|&(n, c, t)| {
                json!({"name": self.trace.strings.get(strato_trace::StrId(n)), "count": c, "total_ns": clamp_i64(t)})
            })
            .collect();
        let others = (
            rest.iter().map(|r| r.1).sum::<u64>(),
            rest.iter().map(|r| r.2).sum::<i128>(),
        );
        Ok(json!({
            "t0": t0,
            "t1": t1,
            "count": count,
            "total_ns": clamp_i64(total),
            "names": listed,
            "others": {"names": rest.len(), "count": others.0, "total_ns": clamp_i64(others.1)},
        }))
    }

    /// `GET /api/steps`: the `ProfilerStep#N` annotations of every rank.
    pub fn steps(&self) -> Value {
        steps_json(self.overlays.steps(self.analysed()), self.origin)
    }

    /// `GET /api/critical-path?step=N|whole`: the critical path of every rank in step `N`
    /// (default: the first step; the whole trace when it has none, or with `step=whole`), as
    /// `strato critical-path` finds it: its length, its time by kind, the late peers it waited
    /// for (each with the edge between ranks: `from` the peer's kernel, `to` this rank's, at
    /// `arrived_ns` when the last member arrived), and its events (each with its lane, row
    /// and times on the timeline).
    pub fn critical_path(&self, params: &Params) -> Result<Value, ApiError> {
        let steps = self.overlays.steps(self.analysed());
        let step = match params.get("step").map(String::as_str) {
            None => steps.keys().next().copied(),
            Some("whole") => None,
            Some(text) => {
                let n: u64 = text.parse().map_err(|_| {
                    ApiError::bad(format!("step: a step number or \"whole\", not {text:?}"))
                })?;
                if !steps.contains_key(&n) {
                    return Err(ApiError::not_found(format!(
                        "no ProfilerStep#{n} in this trace"
                    )));
                }
                Some(n)
            }
        };
        let paths = self.overlays.critical_path(self.analysed(), step);
        let paths = match paths.as_ref() {
            Ok(paths) => paths,
            Err(e) => {
                return Err(ApiError {
                    status: 422,
                    message: format!("critical path: {e}"),
                })
            }
        };
        let ranks: Vec<Value> = paths
            .iter()
            .map(|p| {
                let events: Vec<Value> = p
                    .events
                    .iter()
                    .map(|e| {
                        let mut v = self.summary(e.span.0);
                        v["kind"] = json!(e.kind.as_str());
                        v
                    })
                    .collect();
                let late_peers: Vec<Value> =
                    p.late_peers.iter().map(|l| self.late_peer(l)).collect();
                json!({
                    "rank": p.rank,
                    "source": p.source,
                    "length_ns": p.length_ns,
                    "work_ns": p.work_ns,
                    "by_kind": p.by_kind.iter().map(|(k, v)| (k.as_str().to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
                    "late_peers": late_peers,
                    "events": events,
                })
            })
            .collect();
        Ok(json!({ "step": step, "ranks": ranks }))
    }

    /// `GET /api/findings`: `strato advise`'s findings, each with its evidence placed on the
    /// timeline (times since the origin).
    pub fn findings(&self) -> Result<Value, ApiError> {
        let report = self
            .overlays
            .findings(self.analysed())
            .as_ref()
            .map_err(|e| ApiError {
                status: 422,
                message: format!("advise: {e}"),
            })?;
        let mut findings = report.get("findings").cloned().unwrap_or(json!([]));
        for f in findings.as_array_mut().into_iter().flatten() {
            for e in f
                .get_mut("evidence")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                for key in ["start_ns", "end_ns"] {
                    if let Some(t) = e.get(key).and_then(Value::as_i64) {
                        e[key] = json!(t - self.origin);
                    }
                }
            }
        }
        Ok(json!({ "findings": findings }))
    }

    /// `GET /api/collectives?t0=&t1=`: the collectives matched across ranks with a member
    /// kernel in `[t0, t1)` (at most [`COLLECTIVES_LIMIT`], earliest first): kind, bytes,
    /// whether every expected rank is there, and each member's kernel (lane, row, times on
    /// the timeline) with its wait for the last arrival; `last` is the rank that arrived last
    /// (the one the others waited for).
    pub fn collectives(&self, params: &Params) -> Result<Value, ApiError> {
        let (t0, t1) = self.window_of(params)?;
        let (a, b) = (t0 + self.origin, t1 + self.origin);
        let instances = self.overlays.collectives(self.analysed());
        let mut shown = Vec::new();
        let mut more = 0usize;
        for inst in instances {
            if !inst
                .members
                .iter()
                .any(|m| m.local_start < b && m.local_end > a)
            {
                continue;
            }
            if shown.len() == COLLECTIVES_LIMIT {
                more += 1;
                continue;
            }
            let last = inst
                .members
                .iter()
                .max_by_key(|m| (m.start, m.job_rank))
                .map(|m| m.job_rank);
            let members: Vec<Value> = inst
                .members
                .iter()
                .map(|m| {
                    let mut v = self.summary(m.kernel.0);
                    v["rank"] = json!(m.job_rank);
                    v["wait_ns"] = json!(m.wait_ns);
                    v
                })
                .collect();
            shown.push(json!({
                "kind": inst.kind.as_str(),
                "bytes": inst.bytes,
                "complete": inst.complete,
                "last": if inst.members.len() > 1 { last } else { None },
                "members": members,
            }));
        }
        Ok(json!({ "collectives": shown, "more": more, "matched": instances.len() }))
    }

    /// A span in a list: id, name, level, lane, row and times.
    /// A late peer of a rank's critical path with its edge placed on the timeline.
    fn late_peer(&self, late: &strato_analysis::paths::critical_path::LatePeer) -> Value {
        let end = |span: Option<SpanId>| {
            span.filter(|s| (s.0 as usize) < self.trace.spans.len())
                .map_or(Value::Null, |s| self.summary(s.0))
        };
        json!({
            "peer": late.peer,
            "collective": late.collective,
            "waited_ns": late.waited_ns,
            "arrived_ns": late.edge.arrived_ns - self.origin,
            "from": end(late.edge.peer_kernel),
            "to": end(late.edge.own_kernel),
        })
    }

    /// For a graph launch (a CPU call named `...GraphLaunch`): the device ops it replayed, at
    /// most [`REPLAYED_LIMIT`] in start order, and how many in all. A replayed op attributed to
    /// its capture (`--graph-capture`, or a trace's own graph node links) is the end of a
    /// `graph_node` flow from its captured launch, which sits inside the launch call on a
    /// graph-capture track of the same rank; one left unattributed keeps the launch's
    /// correlation. `None` for any other span.
    fn replayed_by(&self, index: u32) -> Option<(Vec<Value>, usize)> {
        let trace = &self.trace;
        let launch = &trace.spans[index as usize];
        let track = trace.track(launch.track);
        if !matches!(track.kind, strato_trace::TrackKind::Thread { .. })
            || !strato_trace::names::is_graph_launch_name(trace.str(launch.name))
        {
            return None;
        }
        let on_device = |s: u32| {
            let span = &trace.spans[s as usize];
            let t = trace.track(span.track);
            t.rank == track.rank && matches!(t.kind, strato_trace::TrackKind::DeviceQueue { .. })
        };
        let mut ops: Vec<u32> = Vec::new();
        if let Some(c) = launch.correlation.get() {
            let lo = self.by_correlation.partition_point(|&(k, _)| k < c);
            ops.extend(
                self.by_correlation[lo..]
                    .iter()
                    .take_while(|&&(k, _)| k == c)
                    .map(|&(_, s)| s)
                    .filter(|&s| on_device(s)),
            );
        }
        let node_flow = trace.strings.lookup(strato_trace::names::GRAPH_NODE_FLOW);
        for flow in trace.flows.iter().filter(|f| Some(f.category) == node_flow) {
            let (Some(from), Some(to)) = (&flow.from, &flow.to) else {
                continue;
            };
            let (Some(captured), Some(op)) = (from.span, to.span) else {
                continue;
            };
            let copy = &trace.spans[captured.0 as usize];
            let copy_track = trace.track(copy.track);
            if copy_track.rank == track.rank
                && strato_trace::names::is_graph_capture_track(copy_track)
                && copy.start >= launch.start
                && copy.end <= launch.end
                && on_device(op.0)
            {
                ops.push(op.0);
            }
        }
        ops.sort_by_key(|&s| (trace.spans[s as usize].start, s));
        ops.dedup();
        let total = ops.len();
        let shown = ops
            .into_iter()
            .take(REPLAYED_LIMIT)
            .map(|s| self.summary(s))
            .collect();
        Some((shown, total))
    }

    fn summary(&self, index: u32) -> Value {
        let s = &self.trace.spans[index as usize];
        json!({
            "id": index,
            "name": self.trace.str(s.name),
            "level": s.level.as_str(),
            "lane": s.track.0,
            "row": self.timeline.row_of(SpanId(index)),
            "start_ns": s.start - self.origin,
            "end_ns": s.end - self.origin,
        })
    }

    fn window_of(&self, params: &Params) -> Result<(Ns, Ns), ApiError> {
        let get = |name: &str| {
            params
                .get(name)
                .ok_or_else(|| ApiError::bad(format!("{name}: missing (ns since origin_ns)")))
                .and_then(|text| parse_time(name, text))
        };
        let (t0, t1) = (get("t0")?, get("t1")?);
        if t1 <= t0 {
            return Err(ApiError::bad(format!("t1 ({t1}) must be after t0 ({t0})")));
        }
        Ok((t0, t1))
    }

    fn lanes_of(&self, params: &Params) -> Result<Vec<u32>, ApiError> {
        let count = self.timeline.lane_count();
        let Some(list) = params.get("lanes").filter(|l| !l.is_empty()) else {
            return Ok(self.timeline.lanes().iter().map(|l| l.id).collect());
        };
        let mut lanes = Vec::new();
        let mut seen = vec![false; count];
        for part in list.split(',') {
            let lane = part
                .parse::<u32>()
                .ok()
                .filter(|&l| (l as usize) < count)
                .ok_or_else(|| {
                    ApiError::bad(format!(
                        "lanes: comma-separated lane ids below {count}, not {part:?}"
                    ))
                })?;
            if !std::mem::replace(&mut seen[lane as usize], true) {
                lanes.push(lane);
            }
        }
        Ok(lanes)
    }
}

/// The range of time a request may name: a job of up to ~292 years either side of its origin.
fn parse_time(name: &str, text: &str) -> Result<Ns, ApiError> {
    const LIMIT: Ns = 1 << 62;
    text.parse::<Ns>()
        .ok()
        .filter(|t| t.abs() <= LIMIT)
        .ok_or_else(|| {
            ApiError::bad(format!(
                "{name}: a whole number of ns since origin_ns, not {text:?}"
            ))
        })
}

fn level_index(level: Level) -> usize {
    Level::ALL.iter().position(|&l| l == level).unwrap_or(0)
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// JSON has no NaN or infinity: those are sent as null.
fn finite(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

/// The names an answer uses, each sent once.
#[derive(Default)]
struct Names {
    ids: HashMap<u32, usize>,
    texts: Vec<String>,
}

impl Names {
    fn id(&mut self, trace: &Trace, name: strato_trace::StrId) -> usize {
        let next = self.texts.len();
        *self.ids.entry(name.0).or_insert_with(|| {
            self.texts.push(trace.str(name).to_string());
            next
        })
    }
}

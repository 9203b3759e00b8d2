//! CPU samples (`COMPOSITE_EVENTS` with their `SAMPLING_CALLCHAINS`): each sample assembled from
//! its call-chain rows and kept as an instant carrying its folded stack.

use std::borrow::Cow;

use serde_json::{Map, Value};
use strato_record::sample::{fold_leaf_first, frame_label, CPU_SAMPLE_CATEGORY, UNKNOWN_SYMBOL};
use strato_trace::{Level, StrId};

use super::schema::{for_each_row, int, quote, text};
use super::{Importer, CALLCHAINS, SAMPLES, STRINGS};

impl Importer<'_> {
    /// CPU samples (`COMPOSITE_EVENTS` with their `SAMPLING_CALLCHAINS`): one instant per
    /// sample on its thread in the representation `strato record --sample` writes (category
    /// [`CPU_SAMPLE_CATEGORY`], named by the whole call chain folded outermost first, each
    /// frame `symbol [module]`; see `strato_record::sample`), so the per-operation flame graphs
    /// and `export --folded/--firefox` read nsys samples like live ones. A frame nsys could not
    /// resolve (`unresolved`, its symbol an address) is [`UNKNOWN_SYMBOL`] in its module, as in
    /// a live recording; with `keep_args`, args keep the raw symbols (`stack`, leaf first).
    pub(super) fn samples(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let chains = self.schema.has_col(CALLCHAINS, "id")
            && self.schema.has_col(CALLCHAINS, "stackDepth")
            && self.schema.has_col(CALLCHAINS, "symbol");
        let strings = self.schema.has_col(STRINGS, "value");
        let Some(mut q) = self.schema.select(SAMPLES) else {
            return Ok(());
        };
        let id = q.col("id");
        let start = q.col("start");
        let gtid = q.col("globalTid");
        let cpu = q.col("cpu");
        let state = q.col("threadState");
        let cycles = q.col("cpuCycles");
        let (depth, symbol, module, unresolved) = if chains && strings {
            let has_module = self.schema.has_col(CALLCHAINS, "module");
            q.joins = format!(
                " LEFT JOIN {c} AS c ON c.id = t.id \
                 LEFT JOIN {s} AS sym ON sym.id = c.symbol{module_join}",
                c = quote(CALLCHAINS),
                s = quote(STRINGS),
                module_join = if has_module {
                    format!(" LEFT JOIN {} AS mod ON mod.id = c.module", quote(STRINGS))
                } else {
                    String::new()
                },
            );
            let depth = q.push("c.stackDepth".into());
            let symbol = q.push("sym.value".into());
            let module = if has_module {
                q.push("mod.value".into())
            } else {
                q.push("NULL".into())
            };
            let unresolved = if self.schema.has_col(CALLCHAINS, "unresolved") {
                q.push("c.unresolved".into())
            } else {
                q.push("NULL".into())
            };
            q.tail = " ORDER BY t.id, c.stackDepth".into();
            (depth, symbol, module, unresolved)
        } else {
            let null = q.push("NULL".into());
            (null, null, null, null)
        };
        let sql = q.sql();
        let (level, _) = self.level_and_category(SAMPLES, Level::Os);
        let category = self.trace.intern(CPU_SAMPLE_CATEGORY);
        let mut pending: Option<Sample> = None;
        for_each_row(self.conn, &sql, |row| {
            let Some(sample_id) = int(row, id) else {
                return;
            };
            if pending.as_ref().is_none_or(|p| p.id != sample_id) {
                if let Some(done) = pending.take() {
                    self.push_sample(done, category, level);
                }
                if !self.row_read() {
                    return;
                }
                let Some(ts) = self.instant_time(int(row, start)) else {
                    return;
                };
                pending = Some(Sample {
                    id: sample_id,
                    ts,
                    global_tid: int(row, gtid),
                    cpu: int(row, cpu),
                    state: int(row, state),
                    cycles: int(row, cycles),
                    frames: Vec::new(),
                    stack: Vec::new(),
                    leaf_module: None,
                });
            }
            let Some(sample) = pending.as_mut() else {
                return;
            };
            if let Some(sym) = text(row, symbol) {
                let module = text(row, module);
                let module_name = module.as_deref().unwrap_or("?");
                let label = if int(row, unresolved).is_some_and(|u| u != 0) {
                    frame_label(UNKNOWN_SYMBOL, module_name)
                } else {
                    frame_label(&sym, module_name)
                };
                sample.frames.push(label);
                if int(row, depth) == Some(0) {
                    sample.leaf_module = module.map(Cow::into_owned);
                }
                if keep {
                    sample.stack.push(sym.into_owned());
                }
            }
        })?;
        if let Some(done) = pending.take() {
            self.push_sample(done, category, level);
        }
        Ok(())
    }

    pub(super) fn push_sample(&mut self, sample: Sample, category: StrId, level: Level) {
        let Some(g) = sample.global_tid else {
            return;
        };
        let track = self.thread_track(g);
        let name = self.trace.intern(&fold_leaf_first(&sample.frames));
        let args = self.options.keep_args.then(|| {
            let mut a = Map::new();
            if let Some(cpu) = sample.cpu {
                a.insert("cpu".into(), Value::from(cpu));
            }
            if let Some(s) = sample.state {
                a.insert("threadState".into(), self.thread_states.label_value(s));
            }
            if let Some(c) = sample.cycles {
                a.insert("cpuCycles".into(), Value::from(c));
            }
            if let Some(m) = sample.leaf_module {
                a.insert("module".into(), Value::String(m));
            }
            if !sample.stack.is_empty() {
                let stack = sample.stack.into_iter().map(Value::String).collect();
                a.insert("stack".into(), Value::Array(stack));
            }
            a
        });
        self.instant(track, sample.ts, name, category, level, args);
    }
}

/// One CPU sample being assembled from its call-chain rows.
pub(super) struct Sample {
    pub(super) id: i64,
    pub(super) ts: i64,
    pub(super) global_tid: Option<i64>,
    pub(super) cpu: Option<i64>,
    pub(super) state: Option<i64>,
    pub(super) cycles: Option<i64>,
    /// Frame labels (`symbol [module]`), leaf first, in `stackDepth` order.
    pub(super) frames: Vec<String>,
    /// The raw symbols, leaf first (args `stack`, with `keep_args`).
    pub(super) stack: Vec<String>,
    pub(super) leaf_module: Option<String>,
}

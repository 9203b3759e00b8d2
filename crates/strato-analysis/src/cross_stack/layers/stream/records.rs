//! The records [`super::LayersStream`] keeps per span, device op and launch, in the sizes the
//! docs give (docs/analyses/layers-roofline.md, "Cost"), with the bits packed into them and the
//! interned costs. Plain data: the stream fills them, its sweeps read them.

use super::*;

// The sizes the docs give (docs/analyses/layers-roofline.md, "Cost").
const _: () = assert!(std::mem::size_of::<ThreadSpan>() == 32);
const _: () = assert!(std::mem::size_of::<Correlated>() == 24);
const _: () = assert!(std::mem::size_of::<DeviceOp>() == 32);
const _: () = assert!(std::mem::size_of::<Instance>() == 40);

/// [`ThreadSpan::bits`]: its name is a step marker (`ProfilerStep#N`).
pub(super) const STEP_NAME: u8 = 1;
/// [`ThreadSpan::bits`] in the sweep: it or an ancestor is a framework op.
pub(super) const UNDER_BACKEND: u8 = 2;
/// [`ThreadSpan::bits`] in the sweep: it or a descendant launched device work.
pub(super) const LAUNCHED: u8 = 4;
/// [`ThreadSpan::cost`] of a span that is not a framework op, or whose cost is unknown.
pub(super) const NO_COST: u32 = u32::MAX;
/// [`DeviceOp::track`]'s bit saying the op has a correlation.
pub(super) const HAS_CORRELATION: u32 = 1 << 31;
/// [`Correlated::track`]'s bit saying the span is an accelerator API call.
pub(super) const API: u32 = 1 << 31;
/// Not found: no layer, no launch.
pub(super) const NONE: u32 = u32::MAX;

/// A span of a CPU thread (thread states aside), as the sweep reads it (32 bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct ThreadSpan {
    pub(super) start: Ns,
    pub(super) end: Ns,
    /// Its index in the whole trace.
    pub(super) index: u32,
    pub(super) name: StrId,
    /// Its cost in [`Costs`] when it is a framework op with a known cost, else [`NO_COST`];
    /// once swept, a layer's own cost or the sum of its children's.
    pub(super) cost: u32,
    /// Its effective level ([`effective_level`]) in the top 4 bits, its flags
    /// ([`STEP_NAME`], [`UNDER_BACKEND`], [`LAUNCHED`]) in the next 3, and in the other 25 the
    /// id of its [`strato_trace::Span::same_extent_order`] (from 2^25 - 1 up, ids compare
    /// equal): one word, so that a span takes 32 bytes.
    pub(super) word: u32,
}

/// [`ThreadSpan::word`]'s bits below the level: flags, then the id.
pub(super) const ID_BITS: u32 = 25;
pub(super) const FLAG_SHIFT: u32 = ID_BITS;
pub(super) const LEVEL_SHIFT: u32 = ID_BITS + 3;

impl ThreadSpan {
    pub(super) fn word(level: Level, bits: u8, order: u32) -> u32 {
        let id = (order & 0x0FFF_FFFF).min((1 << ID_BITS) - 1);
        (u32::from(level.code()) << LEVEL_SHIFT) | (u32::from(bits & 7) << FLAG_SHIFT) | id
    }

    /// Its effective level.
    pub(super) fn level(&self) -> Level {
        Level::from_code((self.word >> LEVEL_SHIFT) as u8).unwrap_or(Level::Other)
    }

    pub(super) fn bits(&self) -> u8 {
        ((self.word >> FLAG_SHIFT) & 7) as u8
    }

    pub(super) fn set_bits(&mut self, bits: u8) {
        self.word = (self.word & !(7 << FLAG_SHIFT)) | (u32::from(bits & 7) << FLAG_SHIFT);
    }

    /// Its effective level, then its [`strato_trace::Span::same_extent_order`]'s id.
    pub(super) fn nesting(&self) -> u32 {
        self.word & !(7 << FLAG_SHIFT)
    }

    /// The order of the whole-trace tables: parents before their children.
    pub(super) fn key(&self) -> (Ns, std::cmp::Reverse<Ns>, u32, u32) {
        (
            self.start,
            std::cmp::Reverse(self.end),
            self.nesting(),
            self.index,
        )
    }

    pub(super) fn duration(&self) -> Ns {
        self.end.saturating_sub(self.start)
    }
}

/// A thread span with a correlation, which may be a launch (24 bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Correlated {
    pub(super) correlation: u64,
    pub(super) start: Ns,
    pub(super) index: u32,
    /// Its track, with [`API`].
    pub(super) track: u32,
}

impl Correlated {
    pub(super) fn track(&self) -> usize {
        (self.track & !API) as usize
    }
}

/// A device op (device work on a device queue), in trace order (32 bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct DeviceOp {
    pub(super) start: Ns,
    pub(super) end: Ns,
    /// Its launch correlation when [`DeviceOp::track`] has [`HAS_CORRELATION`].
    pub(super) correlation: u64,
    /// Its track, with [`HAS_CORRELATION`].
    pub(super) track: u32,
    pub(super) name: StrId,
}

impl DeviceOp {
    pub(super) fn duration(&self) -> Ns {
        self.end.saturating_sub(self.start)
    }
}

/// A `[memory]` allocation (positive `Bytes`) on a thread track.
#[derive(Debug, Clone, Copy)]
pub(super) struct Allocation {
    pub(super) ts: Ns,
    pub(super) bytes: i64,
    pub(super) track: u32,
}

/// A layer instance, as the tables read it (40 bytes). Every instance has the one level of
/// its source's layers, so its key in the whole-trace order is (start, longer first, the
/// source's numbering, id).
#[derive(Debug, Clone, Copy)]
pub(super) struct Instance {
    pub(super) start: Ns,
    pub(super) end: Ns,
    pub(super) index: u32,
    pub(super) name: StrId,
    /// Its cost in [`Costs`], or [`NO_COST`].
    pub(super) cost: u32,
    pub(super) track: u32,
    /// Its span's [`ThreadSpan::nesting`].
    pub(super) order: u32,
}

impl Instance {
    pub(super) fn key(&self) -> (Ns, std::cmp::Reverse<Ns>, u32, u32) {
        (
            self.start,
            std::cmp::Reverse(self.end),
            self.order,
            self.index,
        )
    }

    pub(super) fn duration(&self) -> Ns {
        self.end.saturating_sub(self.start)
    }
}

/// A cost as a key: FLOPs and bytes by their bits, and the precision.
pub(super) type CostKey = (Option<u64>, Option<u64>, Option<Precision>);

/// The costs met, each distinct one once (ops of one shape share theirs).
#[derive(Debug, Default)]
pub(super) struct Costs {
    pub(super) distinct: Vec<Cost>,
    pub(super) index: FxHashMap<CostKey, u32>,
}

impl Costs {
    pub(super) fn intern(&mut self, cost: Option<Cost>) -> u32 {
        let Some(cost) = cost else { return NO_COST };
        let key: CostKey = (
            cost.flops.map(f64::to_bits),
            cost.bytes.map(f64::to_bits),
            cost.precision,
        );
        *self.index.entry(key).or_insert_with(|| {
            self.distinct.push(cost);
            self.distinct.len() as u32 - 1
        })
    }

    pub(super) fn get(&self, at: u32) -> Option<Cost> {
        self.distinct.get(at as usize).copied()
    }
}

/// What the kernel table sums of one kernel name.
#[derive(Debug, Default)]
pub(super) struct KernelSums {
    pub(super) durations: Vec<Ns>,
    pub(super) configs: FxHashMap<(Vec<i64>, Vec<i64>), usize>,
    pub(super) occupancy: (f64, usize),
    pub(super) with_metrics: usize,
    pub(super) cost: Cost,
    pub(super) metric_ns: Ns,
}

/// The launches that own device work, and what the sweeps find of them.
pub(super) struct Launches {
    /// (span id, its launch number) of each launch of some device op, by span id.
    pub(super) used: Vec<(u32, u32)>,
    /// Per launch number: the layer above it (its span id, then its instance), or [`NONE`].
    pub(super) layer: Vec<u32>,
}

impl Launches {
    /// The launch number of span `index` when it launched device work.
    pub(super) fn used(&self, index: u32) -> Option<u32> {
        let at = self.used.binary_search_by_key(&index, |u| u.0).ok()?;
        Some(self.used[at].1)
    }
}

/// What the layer tables read of a device op with a launch (16 bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Launched {
    pub(super) duration: Ns,
    /// Its launch's number ([`Launches::layer`]).
    pub(super) launch: u32,
    pub(super) name: StrId,
}

/// One step of a process: the span, what its process's device ops made of it, and the cost
/// of the layers that start in it (added once the layers are known).
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub(super) span: ThreadSpan,
    pub(super) gpu_end: Ns,
    pub(super) busy: Ns,
    pub(super) device_ops: usize,
    pub(super) cost: Cost,
}

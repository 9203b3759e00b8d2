//! What a collective is: its kind and the bandwidth definitions that go with it
//! ([`bandwidths`]: algbw and NCCL's busbw), which kernels are collectives, and the element
//! sizes of the dtypes traces write.

use serde::Serialize;
use strato_trace::Ns;

/// What a collective does, from its name (`Collective name` arg, CPU op or kernel name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    /// NCCL's point-to-point kernel (`ncclKernel_SendRecv`): all-to-alls and send/recv pairs
    /// both run as this, so the kernel alone does not say which.
    SendRecv,
    Send,
    Recv,
    /// A collective kernel whose kind its name does not say (`ncclDevKernel_Generic`).
    Other,
}

impl CollectiveKind {
    /// Stable name in output (`"all_reduce"`, `"send/recv"`).
    pub fn as_str(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::Broadcast => "broadcast",
            CollectiveKind::Reduce => "reduce",
            CollectiveKind::SendRecv => "send/recv",
            CollectiveKind::Send => "send",
            CollectiveKind::Recv => "recv",
            CollectiveKind::Other => "other",
        }
    }

    /// The kind a name says: `allreduce`, `all_reduce`, `_allgather_base`,
    /// `ncclKernel_AllReduce_RING_LL_Sum_float`, `nccl:all_to_all`, ... (case and `_`
    /// ignored). `None` when it names no collective.
    pub fn from_name(name: &str) -> Option<CollectiveKind> {
        let n: String = name
            .split('(')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| *c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        let kind = if n.contains("allreduce") {
            CollectiveKind::AllReduce
        } else if n.contains("allgather") {
            CollectiveKind::AllGather
        } else if n.contains("reducescatter") {
            CollectiveKind::ReduceScatter
        } else if n.contains("alltoall") {
            CollectiveKind::AllToAll
        } else if n.contains("broadcast") || n.contains("bcast") {
            CollectiveKind::Broadcast
        } else if n.contains("sendrecv") {
            CollectiveKind::SendRecv
        } else if n.contains("reduce") {
            CollectiveKind::Reduce
        } else if n.contains("send") {
            CollectiveKind::Send
        } else if n.contains("recv") {
            CollectiveKind::Recv
        } else {
            return None;
        };
        Some(kind)
    }

    /// Whether the kernels of one instance end together on every member (used to align
    /// clocks): all-reduce, all-gather, reduce-scatter.
    pub fn is_symmetric(self) -> bool {
        matches!(
            self,
            CollectiveKind::AllReduce | CollectiveKind::AllGather | CollectiveKind::ReduceScatter
        )
    }

    /// NCCL's bus-bandwidth factor for `n` ranks (nccl-tests' PERFORMANCE.md); `None` for
    /// [`CollectiveKind::Other`] or `n == 0`.
    pub fn busbw_factor(self, n: usize) -> Option<f64> {
        if n == 0 {
            return None;
        }
        let n = n as f64;
        match self {
            CollectiveKind::AllReduce => Some(2.0 * (n - 1.0) / n),
            CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter
            | CollectiveKind::AllToAll => Some((n - 1.0) / n),
            CollectiveKind::Broadcast
            | CollectiveKind::Reduce
            | CollectiveKind::SendRecv
            | CollectiveKind::Send
            | CollectiveKind::Recv => Some(1.0),
            CollectiveKind::Other => None,
        }
    }
}

/// The bandwidths of collectives of `kind` moving `bytes` (NCCL-tests' size, summed over the
/// calls) in `ns`: (algbw, busbw) in decimal GB/s (10^9 B/s = bytes per ns; not GiB/s).
/// algbw = bytes / time; busbw = algbw x [`CollectiveKind::busbw_factor`] for `ranks`
/// (`None` when the group size or the factor is unknown). `None` when `ns` is not positive.
/// The one definition `collectives` (over the transfer time) and `ops` (over the kernels'
/// device time) use.
pub fn bandwidths(
    kind: CollectiveKind,
    bytes: f64,
    ns: Ns,
    ranks: Option<usize>,
) -> Option<(f64, Option<f64>)> {
    if ns <= 0 {
        return None;
    }
    let algbw = bytes / ns as f64;
    let busbw = ranks.and_then(|n| kind.busbw_factor(n)).map(|f| algbw * f);
    Some((algbw, busbw))
}

/// Whether a device op's name is a collective-communication kernel (NCCL, RCCL; HTA's
/// communication rule `^nccl|ncclKernel` plus `rccl`).
/// Allocates nothing: it runs once per device op of every pass that looks for collectives.
pub fn is_collective_kernel(name: &str) -> bool {
    let head = name.as_bytes().get(..4).unwrap_or_default();
    head.eq_ignore_ascii_case(b"nccl")
        || head.eq_ignore_ascii_case(b"rccl")
        || name.contains("ncclKernel")
}

/// Size in bytes of one element of a PyTorch dtype as traces write it (`Float`, `float`,
/// `c10::BFloat16`, `long int`, `unsigned char`).
pub fn dtype_size(dtype: &str) -> Option<u64> {
    let d = dtype
        .trim()
        .trim_start_matches("c10::")
        .to_ascii_lowercase();
    Some(match d.as_str() {
        "float" | "float32" | "int" | "int32" | "unsigned int" | "uint32" | "complexhalf" => 4,
        "double" | "float64" | "long" | "long int" | "int64" | "long long" | "uint64"
        | "complexfloat" | "unsigned long" => 8,
        "half" | "float16" | "bfloat16" | "short" | "short int" | "int16" | "uint16" => 2,
        "byte" | "char" | "signed char" | "unsigned char" | "int8" | "uint8" | "bool"
        | "float8_e4m3fn" | "float8_e5m2" | "float8_e4m3fnuz" | "float8_e5m2fnuz" => 1,
        "complexdouble" => 16,
        _ => return None,
    })
}

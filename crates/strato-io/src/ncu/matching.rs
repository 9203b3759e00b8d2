//! Attaching ncu metrics to a timeline: each profiled launch matched to the kernel of a
//! timeline imported beside it (by device, order and name: ncu's demangled or short names
//! against the timeline's, identifiers compared whole), the unmatched launches kept as their
//! own trace ([`subset`]).

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value};
use strato_trace::{Device, Level, Process, RankId, Span, Trace, TrackId};

use super::FORMAT;

/// Attaches the kernel metrics in `metrics` (an imported ncu trace) to the matching kernels of
/// `timeline`; metrics without a match are appended as their own rank.
///
/// Matching rule. Timeline kernels are the spans on device-queue tracks with level
/// `DeviceKernel` in ranks whose format is not `ncu`. ncu launches are taken in ID (launch)
/// order. For an ncu launch named `N`:
/// - if some timeline kernel is named exactly `N`, the k-th ncu launch named `N` matches the
///   k-th timeline kernel named `N` in start order (ties by span order);
/// - otherwise it matches the earliest not yet matched timeline kernel whose name matches by
///   short name: both names reduced to their function identifier (Itanium-mangled names
///   demangled to the last source name; return type, scopes, template and parameter lists
///   removed) are equal, or one name contains the other's short name as a whole identifier.
///   Timeline names that some ncu launch matches exactly are reserved for exact matches.
///
/// A matched span gets its args rewritten: the existing args JSON object (a non-object blob is
/// kept under `"original_args"`) plus key `"ncu"` holding the launch's args object (`metrics`,
/// launch configuration, `flops`, `dram_bytes`, `duration_ns`, `occupancy_pct`, ...). Launches
/// left unmatched (ncu profiled more launches of a name than the timeline holds, or a kernel
/// the timeline lacks) are appended as their own `ncu` rank with their synthetic placement.
pub fn attach(timeline: &mut Trace, metrics: Trace) {
    let ncu_ranks: FxHashSet<u32> = timeline
        .ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.format == FORMAT)
        .map(|(i, _)| i as u32)
        .collect();
    // Timeline kernels by name, in start order.
    let mut by_name: FxHashMap<String, Vec<usize>> = FxHashMap::default();
    for (i, span) in timeline.spans.iter().enumerate() {
        let Some(track) = timeline.tracks.get(span.track.0 as usize) else {
            continue;
        };
        if track.is_device()
            && span.level == Level::DeviceKernel
            && !ncu_ranks.contains(&track.rank.0)
        {
            by_name
                .entry(timeline.str(span.name).to_owned())
                .or_default()
                .push(i);
        }
    }
    for list in by_name.values_mut() {
        list.sort_by_key(|&i| (timeline.spans[i].start, i));
    }

    let launches: Vec<usize> = (0..metrics.spans.len()).collect();
    let exact_names: FxHashSet<&str> = launches
        .iter()
        .map(|&i| metrics.str(metrics.spans[i].name))
        .filter(|n| by_name.contains_key(*n))
        .collect();
    let mut next_exact: FxHashMap<&str, usize> = FxHashMap::default();
    let mut fallback_pools: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    let mut consumed: FxHashSet<usize> = FxHashSet::default();
    let mut matches: Vec<(usize, usize)> = Vec::new();
    let mut unmatched: Vec<usize> = Vec::new();
    for &launch in &launches {
        let name = metrics.str(metrics.spans[launch].name);
        let found = if let Some(list) = by_name.get(name) {
            let k = next_exact.entry(name).or_insert(0);
            let hit = list.get(*k).copied();
            *k += 1;
            hit
        } else {
            let pool = fallback_pools.entry(name).or_insert_with(|| {
                let short = short_name(name);
                let mut pool: Vec<usize> = by_name
                    .iter()
                    .filter(|(tl, _)| !exact_names.contains(tl.as_str()))
                    .filter(|(tl, _)| names_match(name, &short, tl))
                    .flat_map(|(_, list)| list.iter().copied())
                    .collect();
                pool.sort_by_key(|&i| (timeline.spans[i].start, i));
                pool
            });
            pool.iter().copied().find(|i| !consumed.contains(i))
        };
        match found {
            Some(span) => {
                consumed.insert(span);
                matches.push((span, launch));
            }
            None => unmatched.push(launch),
        }
    }

    for (span, launch) in matches {
        let ncu_args = metrics
            .args_text(metrics.spans[launch].args)
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .unwrap_or_else(|| Value::Object(Map::new()));
        let mut object = match timeline.args_text(timeline.spans[span].args) {
            None => Map::new(),
            Some(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                _ => {
                    let mut map = Map::new();
                    map.insert("original_args".into(), Value::String(text.to_string()));
                    map
                }
            },
        };
        object.insert("ncu".into(), ncu_args);
        let id = timeline.add_args(&Value::Object(object).to_string());
        timeline.spans[span].args = Some(id);
    }
    if !unmatched.is_empty() {
        timeline.append(subset(&metrics, &unmatched));
    }
}

/// A trace holding only the spans `keep` of `source`, with their ranks, processes, devices and
/// tracks.
pub(super) fn subset(source: &Trace, keep: &[usize]) -> Trace {
    let mut out = Trace::default();
    let mut ranks: FxHashMap<u32, RankId> = FxHashMap::default();
    let mut tracks: FxHashMap<u32, TrackId> = FxHashMap::default();
    for &i in keep {
        let span = &source.spans[i];
        let Some(track) = source.tracks.get(span.track.0 as usize) else {
            continue;
        };
        let old_rank = track.rank;
        let rank = match ranks.get(&old_rank.0) {
            Some(&r) => r,
            None => {
                let Some(info) = source.ranks.get(old_rank.0 as usize) else {
                    continue;
                };
                let r = out.add_rank(info.clone());
                for p in source.processes.iter().filter(|p| p.rank == old_rank) {
                    out.processes.push(Process {
                        rank: r,
                        ..p.clone()
                    });
                }
                for d in source.devices.iter().filter(|d| d.rank == Some(old_rank)) {
                    out.devices.push(Device {
                        rank: Some(r),
                        ..d.clone()
                    });
                }
                ranks.insert(old_rank.0, r);
                r
            }
        };
        let track_id = *tracks.entry(span.track.0).or_insert_with(|| {
            out.add_track(strato_trace::Track {
                rank,
                ..track.clone()
            })
        });
        let name = out.intern(source.str(span.name));
        let category = out.intern(source.str(span.category));
        let args = source.args_text(span.args).map(|t| out.add_args(&t));
        out.spans.push(Span {
            track: track_id,
            name,
            category,
            args,
            ..span.clone()
        });
    }
    out.clock = source.clock.clone();
    out
}

/// True when timeline kernel `timeline_name` matches ncu launch `ncu_name` (whose short name is
/// `ncu_short`) by short name: equal short names, or whole-identifier containment either way.
pub(super) fn names_match(ncu_name: &str, ncu_short: &str, timeline_name: &str) -> bool {
    let tl_short = short_name(timeline_name);
    (!ncu_short.is_empty() && ncu_short == tl_short)
        || contains_identifier(timeline_name, ncu_short)
        || contains_identifier(ncu_name, &tl_short)
}

/// True when `needle` occurs in `haystack` with no identifier character on either side.
pub(super) fn contains_identifier(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        !is_ident(before) && !is_ident(after)
    })
}

/// The function identifier of a kernel name: `void ns::gemm<32>(const float *, int)` ->
/// `gemm`; `_ZN12_GLOBAL__N_14gemmILi32EEEvPKf` -> `gemm`; `ampere_sgemm_128x64_tn` as is.
pub(super) fn short_name(name: &str) -> String {
    let name = name.trim();
    if let Some(ident) = itanium_last_name(name) {
        return ident;
    }
    let cleaned = name
        .replace("(anonymous namespace)", "")
        .replace("<unnamed>", "");
    let mut depth = 0i32;
    let mut last = String::new();
    let mut token = String::new();
    for c in cleaned.chars() {
        let ident_char = c.is_alphanumeric() || c == '_';
        if depth == 0 && ident_char {
            token.push(c);
            continue;
        }
        if !token.is_empty() {
            last = std::mem::take(&mut token);
        }
        match c {
            '(' if depth == 0 && !last.is_empty() => return last,
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth = (depth - 1).max(0),
            _ => {}
        }
    }
    if !token.is_empty() {
        last = token;
    }
    last
}

/// The last source name of an Itanium-mangled function name (`_Z...`), or `None`.
pub(super) fn itanium_last_name(name: &str) -> Option<String> {
    let rest = name.strip_prefix("_Z")?.as_bytes();
    let mut i = 0;
    let skip = |i: &mut usize, b: u8| {
        if rest.get(*i) == Some(&b) {
            *i += 1;
        }
    };
    skip(&mut i, b'L');
    skip(&mut i, b'N');
    while matches!(rest.get(i), Some(b'r' | b'V' | b'K')) {
        i += 1;
    }
    if rest.get(i..i + 2) == Some(b"St") {
        i += 2;
    }
    let mut last = None;
    while rest.get(i).is_some_and(u8::is_ascii_digit) {
        let start = i;
        while rest.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let len: usize = std::str::from_utf8(&rest[start..i]).ok()?.parse().ok()?;
        let ident = rest.get(i..i.checked_add(len)?)?;
        last = Some(String::from_utf8_lossy(ident).into_owned());
        i += len;
    }
    last
}

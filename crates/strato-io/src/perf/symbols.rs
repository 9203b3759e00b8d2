//! Symbolization of `perf.data` call chains: the executable code mappings of each process
//! (`PERF_RECORD_MMAP`/`MMAP2`), the module files read for their symbols (regular files only,
//! bounded in size), and each address turned into a `symbol [module]` frame.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use strato_record::sample::{frame_label, Module, UNKNOWN_STACK, UNKNOWN_SYMBOL};

use super::Frame;

/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_KERNEL`, `_USER`,
/// ...), not addresses.
pub(super) const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PROT_EXEC` in an `MMAP2` record's protection.
pub(super) const PROT_EXEC: u32 = 4;

/// The code mappings of a `perf.data` file (`PERF_RECORD_MMAP`/`MMAP2`, executable ones) and
/// the modules they map: how a sample's addresses become frames, the way `strato record
/// --sample` symbolizes them (a return address looked up one byte back, the module's ELF
/// symbol table through [`Module`], `??` where no symbol covers an address). Modules are read
/// from this machine at their recorded path, so a `perf.data` moved from another machine gets
/// `?? [module]` frames where the files differ or are missing. Kernel code (pid -1 mappings,
/// `[kernel.kallsyms]`) is `?? [kernel.kallsyms]`: its symbols are not in the file.
#[derive(Default)]
pub(super) struct Symbolizer {
    /// pid (-1: the kernel) -> start -> (end, file offset at start, module index).
    pub(super) maps: FxHashMap<i32, BTreeMap<u64, (u64, u64, usize)>>,
    /// `(path, symbols)`; no symbols for a pseudo-module (`[vdso]`, the kernel).
    pub(super) modules: Vec<(String, Option<Module>)>,
    pub(super) by_path: FxHashMap<String, usize>,
    pub(super) labels: FxHashMap<(usize, u64), Frame>,
}

impl Symbolizer {
    /// An executable mapping of `pid`.
    pub(super) fn map(&mut self, pid: i32, start: u64, len: u64, page_offset: u64, path: &[u8]) {
        let mut path = String::from_utf8_lossy(path).into_owned();
        if path.starts_with('[') {
            // `[kernel.kallsyms]_text` -> `[kernel.kallsyms]`.
            if let Some(end) = path.find(']') {
                path.truncate(end + 1);
            }
        }
        let module = match self.by_path.get(&path) {
            Some(&m) => m,
            None => {
                let loadable = pid != -1 && path.starts_with('/') && is_module_file(&path);
                let symbols = loadable.then(|| Module::load(&path));
                self.modules.push((path.clone(), symbols));
                self.by_path.insert(path, self.modules.len() - 1);
                self.modules.len() - 1
            }
        };
        let end = start.saturating_add(len);
        self.maps
            .entry(pid)
            .or_default()
            .insert(start, (end, page_offset, module));
    }

    /// A new process `child` starts with a copy of `parent`'s mappings.
    pub(super) fn fork(&mut self, parent: i32, child: i32) {
        if let Some(maps) = self.maps.get(&parent).cloned() {
            self.maps.insert(child, maps);
        }
    }

    /// `pid` ran `execve`: its old mappings are gone (the new image's follow).
    pub(super) fn exec(&mut self, pid: i32) {
        self.maps.remove(&pid);
    }

    /// The frame at `addr` in `pid`, or None when no mapping holds it.
    pub(super) fn frame(&mut self, pid: i32, addr: u64) -> Option<Frame> {
        let hit = [pid, -1].into_iter().find_map(|p| {
            let (&start, &(end, page_offset, module)) =
                self.maps.get(&p)?.range(..=addr).next_back()?;
            // A damaged mapping's offset can overflow: then it holds nothing.
            let offset = (addr < end).then(|| page_offset.checked_add(addr - start))??;
            Some((module, offset))
        })?;
        let frame = self.labels.entry(hit).or_insert_with(|| {
            let (path, symbols) = &self.modules[hit.0];
            let symbol = symbols
                .as_ref()
                .map_or_else(|| UNKNOWN_SYMBOL.to_owned(), |m| m.symbol(hit.1));
            Frame {
                label: frame_label(&symbol, path),
                symbol,
            }
        });
        Some(frame.clone())
    }

    /// A sample's frames, leaf first: its call chain (context markers left out; the first
    /// address of each context — kernel, user — is exact, the rest are return addresses),
    /// else its ip. As in a live recording, an unmapped exact address is [`UNKNOWN_STACK`] and
    /// the chain ends at the first unmapped return address (a frame-pointer walk through code
    /// without frame pointers ends there or earlier).
    pub(super) fn frames(
        &mut self,
        pid: i32,
        ip: Option<u64>,
        chain: Option<Vec<u64>>,
    ) -> Vec<Frame> {
        let chain = chain.unwrap_or_else(|| ip.into_iter().collect());
        let mut out = Vec::new();
        let mut exact = true;
        for addr in chain {
            if addr >= PERF_CONTEXT_MAX {
                exact = true;
                continue;
            }
            let at = if exact { addr } else { addr.saturating_sub(1) };
            let leaf = std::mem::replace(&mut exact, false);
            match self.frame(pid, at) {
                Some(f) => out.push(f),
                None if leaf => out.push(Frame {
                    symbol: UNKNOWN_STACK.to_owned(),
                    label: UNKNOWN_STACK.to_owned(),
                }),
                None => break,
            }
        }
        out
    }
}

/// Module files larger than this are not read for symbols (their frames are `?? [module]`).
pub(super) const MAX_MODULE_BYTES: u64 = 4 << 30;

/// Whether the mapped file at `path` (a path recorded in the `perf.data`, so anything) may be
/// read for its symbols: a regular file of a real size, not in a pseudo-filesystem. A device
/// (`/dev/zero`), a FIFO or `/proc/self/pagemap` (size 0, endless to read) would make the
/// import read forever or block.
pub(super) fn is_module_file(path: &str) -> bool {
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    if real.starts_with("/proc") || real.starts_with("/sys") || real.starts_with("/dev") {
        return false;
    }
    std::fs::metadata(&real).is_ok_and(|m| m.is_file() && (1..=MAX_MODULE_BYTES).contains(&m.len()))
}

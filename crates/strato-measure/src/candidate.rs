//! Candidates and candidate-list files.
//!
//! A candidate is one program to measure: OpenCL C source, kernel name, build options, global
//! and local sizes and an argument spec (buffers are allocated and initialised by the worker).
//! Workers other than the OpenCL one (e.g. the Python TVM worker) read an opaque `payload`
//! instead. The file format is documented in `docs/measure.md`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{MeasureError, Result};

/// How a buffer argument is initialised before the timed runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum BufferInit {
    /// All bytes zero.
    #[default]
    Zero,
    /// f32 values 1.0.
    Ones,
    /// Deterministic pseudo-random f32 values in [0, 1).
    Random,
}

/// One kernel argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arg {
    /// A global buffer of `bytes` bytes.
    Buffer {
        bytes: u64,
        #[serde(default)]
        init: BufferInit,
    },
    /// `__local` memory of `bytes` bytes.
    Local { bytes: u64 },
    /// A 32-bit signed integer.
    Int(i32),
    /// A 32-bit unsigned integer.
    Uint(u32),
    /// A 32-bit float.
    Float(f32),
}

/// Deliberate faults, for testing how the engine handles broken workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// The worker calls `abort()` when it receives the candidate.
    Abort,
    /// The worker sleeps forever (a hang outside the device).
    Hang,
}

/// One candidate program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Candidate {
    /// Unique name within a list.
    pub name: String,
    /// The tuner's parameters for this candidate (reported back, not interpreted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_json::Value>,
    /// OpenCL C source text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Kernel function name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Options for `clBuildProgram`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build_options: String,
    /// Global work size (1 to 3 dimensions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub global: Vec<usize>,
    /// Local work size; `None` lets the implementation choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<Vec<usize>>,
    /// Kernel arguments in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<Arg>,
    /// Opaque request for non-OpenCL workers (e.g. a TVM artifact path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// Testing hook: a deliberate worker fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
}

impl Candidate {
    /// A stable key for caching a built program in a worker.
    pub fn program_key(&self) -> String {
        format!(
            "{}\u{0}{}\u{0}{}",
            self.kernel.as_deref().unwrap_or(""),
            self.build_options,
            self.source.as_deref().unwrap_or("")
        )
    }
}

/// A candidate as written in a list file: the source may be inline, a file, or a reference into
/// the file's shared `sources` table.
#[derive(Debug, Deserialize)]
struct RawCandidate {
    #[serde(flatten)]
    candidate: Candidate,
    #[serde(default)]
    source_file: Option<String>,
    #[serde(default)]
    source_ref: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawList {
    Object {
        #[serde(default)]
        sources: BTreeMap<String, String>,
        candidates: Vec<RawCandidate>,
    },
    Array(Vec<RawCandidate>),
}

/// Parses a candidate list (JSON text); `base` resolves `source_file` paths.
pub fn parse_list(text: &str, base: Option<&Path>) -> Result<Vec<Candidate>> {
    let raw: RawList =
        serde_json::from_str(text).map_err(|e| MeasureError::CandidateList(e.to_string()))?;
    let (sources, raws) = match raw {
        RawList::Object {
            sources,
            candidates,
        } => (sources, candidates),
        RawList::Array(c) => (BTreeMap::new(), c),
    };
    let mut out = Vec::with_capacity(raws.len());
    let mut names = std::collections::HashSet::new();
    for (i, raw) in raws.into_iter().enumerate() {
        let mut c = raw.candidate;
        if c.name.is_empty() {
            c.name = format!("candidate-{i}");
        }
        if !names.insert(c.name.clone()) {
            return Err(MeasureError::CandidateList(format!(
                "duplicate candidate name {:?}",
                c.name
            )));
        }
        if let Some(r) = raw.source_ref {
            let text = sources.get(&r).ok_or_else(|| {
                MeasureError::CandidateList(format!("{}: unknown source_ref {r:?}", c.name))
            })?;
            c.source = Some(text.clone());
        } else if let Some(f) = raw.source_file {
            let path = match base {
                Some(b) => b.join(&f),
                None => Path::new(&f).to_path_buf(),
            };
            let text = std::fs::read_to_string(&path).map_err(|e| {
                MeasureError::CandidateList(format!("{}: {}: {e}", c.name, path.display()))
            })?;
            c.source = Some(text);
        }
        out.push(c);
    }
    Ok(out)
}

/// Reads a candidate list file.
pub fn read_list(path: &Path) -> Result<Vec<Candidate>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| MeasureError::CandidateList(format!("{}: {e}", path.display())))?;
    parse_list(&text, path.parent())
}

/// Writes candidates as a list file sharing identical sources through a `sources` table.
pub fn to_list_json(candidates: &[Candidate]) -> serde_json::Value {
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    let mut by_text: BTreeMap<String, String> = BTreeMap::new();
    let mut list = Vec::with_capacity(candidates.len());
    for c in candidates {
        let mut c = c.clone();
        let source = c.source.take();
        let mut value = serde_json::to_value(&c).unwrap_or(serde_json::Value::Null);
        if let (Some(text), Some(obj)) = (source, value.as_object_mut()) {
            let key = match by_text.get(&text) {
                Some(k) => k.clone(),
                None => {
                    let k = format!("s{}", sources.len());
                    sources.insert(k.clone(), text.clone());
                    by_text.insert(text, k.clone());
                    k
                }
            };
            obj.insert("source_ref".into(), serde_json::Value::String(key));
        }
        list.push(value);
    }
    serde_json::json!({ "sources": sources, "candidates": list })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shared_sources_and_args() {
        let text = r#"{"sources":{"k":"__kernel void f(__global float*a, int n){}"},
            "candidates":[{"name":"a","source_ref":"k","kernel":"f","global":[16],"local":[4],
              "args":[{"buffer":{"bytes":64,"init":"random"}},{"int":16}]}]}"#;
        let list = parse_list(text, None).unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].kernel.as_deref(), Some("f"));
        assert!(list[0].source.as_deref().unwrap().contains("__kernel"));
        assert_eq!(
            list[0].args[0],
            Arg::Buffer {
                bytes: 64,
                init: BufferInit::Random
            }
        );
        assert_eq!(list[0].args[1], Arg::Int(16));
        let back = to_list_json(&list);
        let again = parse_list(&back.to_string(), None).unwrap();
        assert_eq!(again, list);
    }

    #[test]
    fn rejects_duplicates() {
        let text = r#"[{"name":"a"},{"name":"a"}]"#;
        assert!(parse_list(text, None).is_err());
    }
}

//! Launching profiled programs: where the OpenCL layer library is found.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// The OpenCL layer library: `$STRATOSCOPE_OPENCL_LAYER`, else `libstrato_opencl_layer.so`
/// next to the running executable (the installed Python package's `stratoscope/_bin/`, a cargo
/// target dir), or in its `deps/` or `../lib/`; the newest of those found.
pub fn opencl_layer_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STRATOSCOPE_OPENCL_LAYER") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot locate the strato executable")?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let name = "libstrato_opencl_layer.so";
    let candidates = [
        dir.join(name),
        dir.join("deps").join(name),
        dir.join("../lib").join(name),
        dir.join("..").join(name),
    ];
    candidates
        .into_iter()
        .filter(|p| p.exists())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no {name} next to {} (pip install . ships it next to strato; in a checkout, cargo build -p strato-opencl-layer; or set STRATOSCOPE_OPENCL_LAYER)",
                exe.display()
            )
        })
}

//! `strato view`: an interactive timeline of a trace in the browser.
//!
//! - [`timeline`]: the index (lanes, rows, level of detail) over a loaded [`strato_trace::Trace`].
//! - [`api`]: the answers of the HTTP API as JSON (lanes, a window, an event, search,
//!   aggregates), from the timeline and the trace.
//! - [`overlays`]: the analyses' answers on the timeline (steps, the critical path of a
//!   step, advise's findings), computed when first asked.
//! - [`server`]: the local web server: a per-run token, the page's assets (compiled into the
//!   binary: no network, no CDN), the API routes; bad requests get 4xx, never a crash.
//!
//! The crate reads a trace it is given; opening inputs is the engine's (`strato-engine`),
//! and the command line is the CLI's.

mod align;
pub mod api;
pub mod overlays;
pub mod server;
pub mod timeline;

pub use api::{Api, ApiError};
pub use server::{Handler, ServeError, ServeOptions, Server};
pub use timeline::Timeline;

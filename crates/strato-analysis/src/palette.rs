//! The colours every front end draws with: the report's plots and the viewer's timeline (issue
//! 30 item 6). One definition, so that a category keeps its colour on every plot and in the
//! viewer: a stratum ([`Level`]) is the same colour in the viewer's lanes, the report's
//! legends and the flame graphs' frames; a resource of the breakdown is the same colour in
//! every breakdown plot; plots of categories that come from the data (operations, collective
//! kinds) colour them in order from [`SERIES`].
//!
//! The colours are Okabe and Ito's colour-blind-safe set ("Color Universal Design", 2008),
//! extended past its eight with Paul Tol's "muted" colours, which stay apart for the common
//! colour-vision deficiencies. Presentation only: no analysis reads it (it reads no module).

use strato_trace::Level;

/// One colour per stratum, in [`Level::ALL`]'s order.
pub const LEVELS: [&str; 14] = [
    "#E69F00", // Phase
    "#56B4E9", // Operation
    "#009E73", // Python
    "#0072B2", // Backend
    "#D55E00", // Simulator
    "#CC79A7", // Library
    "#F0E442", // AcceleratorApi
    "#882255", // DeviceKernel
    "#117733", // DeviceCopy
    "#44AA99", // DeviceSet
    "#999933", // DeviceSync
    "#AA4499", // Os
    "#888888", // Overhead
    "#BBBBBB", // Other
];

/// The colour of a stratum.
pub fn level(level: Level) -> &'static str {
    LEVELS[level.code() as usize]
}

/// The breakdown's resources: CPU alone, the device alone, both at once, neither.
pub const CPU: &str = "#0072B2";
pub const DEVICE: &str = "#E69F00";
pub const CPU_AND_DEVICE: &str = "#009E73";
pub const IDLE: &str = "#E3E6EA";

/// What has no category of its own (an axis, a total, the interpreter's frames).
pub const NEUTRAL: &str = "#8C959F";

/// The parts of a critical path's window (`strato critical-path`, the report): work in the
/// colour of its stratum, the waits and gaps in their own.
pub mod path {
    use super::Level;

    /// Time in a framework op.
    pub const CPU_OP: &str = level_colour(Level::Backend);
    /// Runtime call time and launch delay.
    pub const LAUNCH: &str = level_colour(Level::AcceleratorApi);
    /// A kernel that is not communication.
    pub const COMPUTE_KERNEL: &str = level_colour(Level::DeviceKernel);
    /// A communication kernel's transfer ([`super::TRANSFER`]).
    pub const COMMUNICATION_KERNEL: &str = super::TRANSFER;
    pub const COPY: &str = level_colour(Level::DeviceCopy);
    /// Waiting for the device.
    pub const DEVICE_WAIT: &str = level_colour(Level::DeviceSync);
    /// Waiting for peers ([`super::PEER_WAIT`]).
    pub const PEER_WAIT: &str = super::PEER_WAIT;
    pub const UNTRACED: &str = "#CC6677";
    pub const BEFORE: &str = "#DDDDDD";
    pub const AFTER: &str = "#EEEEEE";

    /// [`super::level`] in a constant (a level's discriminant is its place in
    /// [`Level::ALL`]: tested).
    const fn level_colour(l: Level) -> &'static str {
        super::LEVELS[l as usize]
    }
}

/// A collective's time waiting for its last peer, and its transfer once all arrived.
pub const PEER_WAIT: &str = "#CC3311";
pub const TRANSFER: &str = "#332288";

/// The OS thread states (`strato record --os`) in display order with their colours; `None`:
/// time no OS data covers.
pub const THREAD_STATES: [(Option<&str>, &str); 7] = [
    (Some("running"), "#009E73"),
    (Some("runnable"), "#E69F00"),
    (Some("blocked:io"), "#0072B2"),
    (Some("blocked:lock"), "#CC3311"),
    (Some("blocked:sleep"), "#CC79A7"),
    (Some("blocked:other"), "#882255"),
    (None, "#BBBBBB"),
];

/// Categories that come from the data, in order of appearance: the Okabe-Ito colours (black
/// left out, yellow last: it is pale on white) then Tol's.
pub const SERIES: [&str; 11] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#882255", "#44AA99",
    "#999933", "#AA4499", "#F0E442",
];

/// The `i`th colour of [`SERIES`] (wrapping).
pub fn series(i: usize) -> &'static str {
    SERIES[i % SERIES.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_has_its_own_colour() {
        let mut seen: Vec<&str> = Level::ALL.iter().map(|&l| level(l)).collect();
        assert_eq!(seen.len(), 14);
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), Level::ALL.len(), "two strata share a colour");
        assert_eq!(level(Level::Python), "#009E73");
        assert_eq!(level(Level::Other), "#BBBBBB");
    }

    #[test]
    fn path_parts_take_their_strata_colours() {
        for (i, &l) in Level::ALL.iter().enumerate() {
            assert_eq!(l as usize, i, "Level::ALL is in declaration order");
        }
        assert_eq!(path::CPU_OP, level(Level::Backend));
        assert_eq!(path::COMPUTE_KERNEL, level(Level::DeviceKernel));
        assert_eq!(path::DEVICE_WAIT, level(Level::DeviceSync));
    }

    #[test]
    fn series_colours_are_distinct_and_wrap() {
        let mut s = SERIES.to_vec();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), SERIES.len());
        assert_eq!(series(SERIES.len()), series(0));
    }
}

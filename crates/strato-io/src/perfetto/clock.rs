//! Perfetto timestamps: a packet's clock (its `timestamp_clock_id`, the sequence's default,
//! else BOOTTIME), clock snapshots, sequence-scoped clocks (incremental or not) and builtin
//! clocks converted to BOOTTIME through the last snapshot that relates them.

use strato_trace::Ns;

use super::{wire, Reader, SequenceClock, BOOTTIME, FIRST_SEQUENCE_CLOCK};

impl<'a> Reader<'a> {
    pub(super) fn clock_snapshot(
        &mut self,
        sequence_id: u32,
        snapshot: &wire::ClockSnapshot,
    ) -> std::result::Result<(), String> {
        let reference = snapshot
            .clocks
            .iter()
            .find(|c| c.clock_id == Some(BOOTTIME))
            .and_then(|c| c.timestamp);
        let Some(reference) = reference.map(i128::from) else {
            // Without BOOTTIME nothing can be related to the trace clock.
            return Ok(());
        };
        for clock in &snapshot.clocks {
            let (Some(id), Some(ts)) = (clock.clock_id, clock.timestamp) else {
                continue;
            };
            let unit_ns = i128::from(clock.unit_multiplier_ns.unwrap_or(1).max(1));
            let value = i128::from(ts);
            if id >= FIRST_SEQUENCE_CLOCK {
                let sequence = self.sequences.entry(sequence_id).or_default();
                sequence.clocks.insert(
                    id,
                    SequenceClock {
                        incremental: clock.is_incremental == Some(true),
                        unit_ns,
                        last: value,
                        offset: reference.saturating_sub(value.saturating_mul(unit_ns)),
                    },
                );
            } else if id != BOOTTIME {
                self.builtin_offsets
                    .insert(id, reference.saturating_sub(value.saturating_mul(unit_ns)));
            }
        }
        Ok(())
    }

    /// A packet's time in BOOTTIME ns.
    pub(super) fn timestamp(
        &mut self,
        sequence_id: u32,
        timestamp: &Option<u64>,
        clock: Option<u32>,
    ) -> std::result::Result<Ns, String> {
        let raw = i128::from(timestamp.unwrap_or(0));
        let sequence = self.sequences.entry(sequence_id).or_default();
        let clock = clock.or(sequence.default_clock).unwrap_or(BOOTTIME);
        let ns = if clock >= FIRST_SEQUENCE_CLOCK {
            let Some(c) = sequence.clocks.get_mut(&clock) else {
                return Err(format!(
                    "timestamp on clock {clock}, which no ClockSnapshot of sequence \
                     {sequence_id} defines"
                ));
            };
            let value = if c.incremental {
                c.last.saturating_add(raw)
            } else {
                raw
            };
            c.last = value;
            c.offset.saturating_add(value.saturating_mul(c.unit_ns))
        } else if clock == BOOTTIME {
            raw
        } else {
            match self.builtin_offsets.get(&clock) {
                Some(offset) => raw.saturating_add(*offset),
                None => {
                    self.unknown_clock_packets += 1;
                    raw
                }
            }
        };
        strato_trace::checked_time(ns).map_err(|_| format!("timestamp {ns} ns is out of range"))
    }
}

//! The estimated gain of a finding (issue 29 item 6): which what-if transform models fixing
//! what a rule finds ([`gain_model`]), and each finding's gain from one replay of the job's
//! graphs with that fix ([`estimate_gains`]). A finding whose fix no transform models, or whose
//! transform selects nothing, keeps `estimated_gain_ns` null and says why in its `gain_note`.

use super::*;

/// The what-if that models fixing what rule `rule` finds (with `evidence`, the finding's): its
/// name (as `strato whatif` takes it) and changes; or why no transform models that fix yet.
/// A straggler finding's fix evens the rank its `step` evidence names.
pub fn gain_model(rule: &str, evidence: &[Evidence]) -> Result<(String, Vec<Scale>), &'static str> {
    match rule {
        host_sync::ID => Ok(("whatif --no-sync".to_owned(), vec![Scale::no_sync("")])),
        multi_rank::STRAGGLER_ID => {
            let rank = evidence
                .iter()
                .find(|e| e.kind == "step")
                .map(|e| e.rank)
                .ok_or("not modelled: the finding names no straggling rank")?;
            Ok((
                format!("whatif --even-straggler, rank {rank}"),
                vec![Scale::even_straggler(Some(rank))],
            ))
        }
        sync_copy::ID => Ok((
            "whatif --async-copies all".to_owned(),
            vec![Scale::async_copies("")],
        )),
        gpu_idle::ID | low_util::ID | step_breakdown::ID => {
            Err("not modelled: no what-if transform gives the device more work")
        }
        launch_bound::ID => Err(
            "not modelled: whatif --graph-launch takes away a region's whole host work, more \
             than the launch overhead this finding is about",
        ),
        small_copies::ID => Err("not modelled: batching copies is not a what-if transform yet"),
        // Its time at stake is the device's; a copy off the compute stream also frees the
        // host's waits for the compute queued ahead of it (param_dlrm8: 16 us at stake per
        // rank, 0.85 ms the job's gain), which the host-sync and sync-copy findings hold.
        copy_overlap::ID => Err(
            "not modelled as this finding's gain: whatif --overlap-copies moves the copies off \
             the compute stream, but its gain takes in the host's waits behind them too \
             (host-sync, sync-copy), beyond this finding's time at stake",
        ),
        multi_rank::EXPOSED_ID => Ok((
            "whatif --overlap-comm".to_owned(),
            vec![Scale::overlap_comm()],
        )),
        _ => Err("not modelled"),
    }
}

/// What a finding's what-if selecting nothing means for its rule (`""`: nothing to add).
fn nothing_selected_because(rule: &str) -> &'static str {
    match rule {
        // `--overlap-comm` takes collectives off the compute they wait for on the device.
        multi_rank::EXPOSED_ID => {
            ": no collective waits for compute on the device (a stream it shares with compute, \
             a wait event), so what holds them back is their launch or their peers; launching \
             them earlier, as smaller buckets would, is not a what-if transform yet"
        }
        _ => "",
    }
}

/// Fills in each finding's [`Finding::estimated_gain_ns`]: one what-if replay per finding whose
/// fix a transform models, all in one call of `gains` (each window's graph built once). A
/// replay that fails leaves the gains unknown and says why.
pub(super) fn estimate_gains(findings: &mut [Finding], gains: &mut GainsOf<'_>) {
    let modelled: Vec<(usize, Vec<Scale>)> = findings
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            gain_model(f.rule, &f.evidence)
                .ok()
                .map(|(_, set)| (i, set))
        })
        .collect();
    if modelled.is_empty() {
        return;
    }
    let sets: Vec<Vec<Scale>> = modelled.iter().map(|(_, set)| set.clone()).collect();
    match gains(&sets) {
        Ok(gains) => {
            for ((i, _), gain) in modelled.iter().zip(gains) {
                let finding = &mut findings[*i];
                match gain {
                    None => {
                        finding.gain_note = format!(
                            "not estimated: {} selects nothing in this trace's graph{}",
                            finding.gain_note,
                            nothing_selected_because(finding.rule)
                        );
                    }
                    // No fix saves more than the time at stake: per-step replays that add up
                    // to more claim time the next steps give back (docs/advise.md, "Known
                    // limit"). Not shown rather than wrong.
                    Some(gain) if gain > finding.time_ns => {
                        finding.gain_note = format!(
                            "not estimated: {} replayed step by step gains {}, more than the {} \
                             at stake: the steps overlap (a step's device work runs into the \
                             next), so each step's replay claims time the next gives back \
                             (`strato whatif --across-steps` simulates them as one run)",
                            finding.gain_note,
                            human(gain),
                            human(finding.time_ns),
                        );
                    }
                    Some(_) => finding.estimated_gain_ns = gain,
                }
            }
        }
        Err(e) => {
            for (i, _) in &modelled {
                findings[*i].gain_note = format!("not estimated: the replay failed: {e}");
            }
        }
    }
}

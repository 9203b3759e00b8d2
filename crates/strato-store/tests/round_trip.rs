//! `read(write(t)) == t` on hand-built traces.
#![allow(clippy::unwrap_used)]

mod common;

use strato_trace::{CounterSample, Rank, Trace, Track, TrackKind};

fn round_trip(trace: &Trace) -> Trace {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profile");
    strato_store::write(trace, &dir).unwrap();
    assert!(strato_store::is_profile_dir(&dir));
    strato_store::read(&dir).unwrap()
}

#[test]
fn every_model_feature_round_trips() {
    let trace = common::full_trace();
    let back = round_trip(&trace);
    // Field by field first, for a readable failure.
    assert_eq!(back.strings, trace.strings);
    assert_eq!(back.args, trace.args);
    assert_eq!(back.ranks, trace.ranks);
    assert_eq!(back.processes, trace.processes);
    assert_eq!(back.tracks, trace.tracks);
    assert_eq!(back.spans, trace.spans);
    assert_eq!(back.instants, trace.instants);
    assert_eq!(back.counters, trace.counters);
    assert_eq!(back.flows, trace.flows);
    assert_eq!(back.devices, trace.devices);
    assert_eq!(back.clock, trace.clock);
    assert_eq!(back, trace);
    // The sign of -0.0 survives too.
    assert!(back.counters[1].value.is_sign_negative());
}

#[test]
fn reading_without_args_drops_only_the_args() {
    let trace = common::full_trace();
    assert!(
        trace.spans.iter().any(|s| s.args.is_some()),
        "fixture has args"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profile");
    strato_store::write(&trace, &dir).unwrap();
    // A damaged args table is not even opened when args are not asked for.
    std::fs::write(dir.join("args.parquet"), b"not parquet").unwrap();
    let options = strato_store::ReadOptions {
        args: false,
        ..Default::default()
    };
    let back = strato_store::read_with(&dir, &options).unwrap();
    let mut expected = trace.clone();
    expected.args = strato_trace::ArgsTable::default();
    for s in &mut expected.spans {
        s.args = None;
    }
    for i in &mut expected.instants {
        i.args = None;
    }
    assert_eq!(back, expected);
    assert!(
        strato_store::read(&dir).is_err(),
        "the full read still checks args"
    );
}

#[test]
fn empty_trace_round_trips_and_writes_every_table() {
    let trace = Trace::default();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("empty");
    strato_store::write(&trace, &dir).unwrap();
    for name in strato_store::table_names() {
        assert!(dir.join(format!("{name}.parquet")).is_file(), "{name}");
    }
    let meta = strato_store::read_metadata(&dir).unwrap();
    assert_eq!(meta.format, strato_store::FORMAT_MARKER);
    assert_eq!(meta.schema_version, 1);
    assert_eq!(meta.tables["spans"].rows, 0);
    assert_eq!(meta.tables["strings"].rows, 1);
    assert_eq!(strato_store::read(&dir).unwrap(), trace);
}

#[test]
fn nan_is_stored_as_is() {
    let mut trace = Trace::default();
    let rank = trace.add_rank(Rank {
        rank: None,
        world_size: None,
        source: "nan".into(),
        format: "test".into(),
        host: None,
        metadata: strato_trace::metadata::SourceMetadata::None,
        notes: Default::default(),
    });
    let track = trace.add_track(Track {
        rank,
        kind: TrackKind::Counter {
            pid: None,
            device: None,
            name: "x".into(),
            unit: "".into(),
        },
        name: None,
        sort_index: None,
    });
    let weird_nan = f64::from_bits(0x7ff8_0000_0000_beef);
    for value in [f64::NAN, -f64::NAN, weird_nan] {
        trace.counters.push(CounterSample {
            track,
            ts: 1,
            value,
        });
    }
    let back = round_trip(&trace);
    // PartialEq on NaN is false, so compare bits.
    let bits = |t: &Trace| {
        t.counters
            .iter()
            .map(|c| c.value.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&back), bits(&trace));
}

#[test]
fn many_rows_span_several_batches() {
    let trace = common::big_trace(150_000);
    let back = round_trip(&trace);
    assert_eq!(back.spans.len(), 150_000);
    assert_eq!(back, trace);
}

#[test]
fn more_rows_than_a_row_group() {
    let mut trace = common::big_trace(10);
    let track = trace.tracks.len() as u32 - 1;
    for i in 0..(1usize << 20) + 3 {
        trace.counters.push(CounterSample {
            track: strato_trace::TrackId(track),
            ts: i as i64,
            value: i as f64,
        });
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profile");
    strato_store::write(&trace, &dir).unwrap();
    let file = std::fs::File::open(dir.join("counters.parquet")).unwrap();
    let reader = parquet::file::serialized_reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    // At least one row group per 2^20 rows (a group also closes early at 8 MiB of pages).
    assert!(reader.metadata().num_row_groups() >= 2);
    assert_eq!(strato_store::read(&dir).unwrap(), trace);
}

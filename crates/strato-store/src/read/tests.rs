//! Unit tests of the reader's row selection.

use super::table::select_rows;

/// The rows a selection selects, as row numbers of the whole file.
fn selected(group_rows: &[u64], rows: &[u32]) -> Vec<u64> {
    let (groups, selection) = select_rows(group_rows, rows);
    let starts: Vec<u64> = group_rows
        .iter()
        .scan(0, |at, &n| {
            let start = *at;
            *at += n;
            Some(start)
        })
        .collect();
    // The selected groups' rows, concatenated, as the reader sees them.
    let mut file_rows = groups
        .iter()
        .flat_map(|&g| starts[g]..starts[g] + group_rows[g]);
    let mut out = Vec::new();
    for selector in selection.iter() {
        for _ in 0..selector.row_count {
            let row = file_rows.next().expect("selection longer than its groups");
            if !selector.skip {
                out.push(row);
            }
        }
    }
    assert!(
        file_rows.next().is_none(),
        "selection shorter than its groups"
    );
    out
}

#[test]
fn row_selection_selects_exactly_the_rows_and_skips_empty_groups() {
    let groups = [4, 3, 5, 1, 2];
    for rows in [
        vec![],
        vec![0],
        vec![3, 4],
        vec![0, 1, 2, 3],
        vec![11, 12, 14],
        vec![5, 6, 13],
        (0..15).collect(),
    ] {
        let want: Vec<u64> = rows.iter().map(|&r| u64::from(r)).collect();
        assert_eq!(selected(&groups, &rows), want, "{rows:?}");
        let (chosen, _) = select_rows(&groups, &rows);
        let mut start = 0;
        for (g, &n) in groups.iter().enumerate() {
            let holds = want.iter().any(|&r| r >= start && r < start + n);
            assert_eq!(chosen.contains(&g), holds, "group {g} of {rows:?}");
            start += n;
        }
    }
}

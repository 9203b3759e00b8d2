//! The registered comparisons: analyses of two profiles, A (the baseline) and B
//! ([`strato_analysis::registry::Comparison`]), each registered once by one line in
//! [`COMPARISONS`]. From that line the `strato` command has `strato NAME A B` (options as flags,
//! `--json`, `--csv [--table T]`) and Python's `Profile.compare(NAME, other)` returns its
//! tables. Opening reads A, reduces it to its side and drops it before reading B, so a
//! comparison holds one trace and two sides at a time.

use std::path::Path;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::registry::{Comparison, InReport, OptionSpec, Reads, TableSpec};

use crate::registry::{
    check_declared, import_options, options_of, table_named, unique_tables, Declaration, Inputs,
    OptionValues, Outcome,
};
use crate::{Engine, EngineError};

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Every registered comparison.
pub static COMPARISONS: &[RegisteredComparison] =
    &[RegisteredComparison::of::<strato_analysis::compare::Diff>()];

/// The registered comparison called `name` (kebab-case, or Python's snake_case).
pub fn find_comparison(name: &str) -> Option<&'static RegisteredComparison> {
    COMPARISONS
        .iter()
        .find(|c| c.name == name || c.name.replace('-', "_") == name)
}

/// One side of a comparison given to [`RegisteredComparison::run_analyzed`]: its label (what
/// the result calls it) and the profile, open and analysed.
pub type LabelledSide<'s, 't> = (&'s str, &'s Analyzed<'t>);

/// A registered comparison, its types erased for the front ends (see [`Comparison`] for each
/// field's rule).
#[derive(Clone, Copy)]
pub struct RegisteredComparison {
    pub name: &'static str,
    pub summary: &'static str,
    pub window: &'static str,
    pub doc: &'static str,
    pub examples: &'static [&'static str],
    pub options: &'static [OptionSpec],
    pub tables: &'static [TableSpec],
    pub reads: Reads,
    pub in_report: InReport,
    pub short_flags: &'static [(&'static str, char)],
    run_inputs: fn(&Engine, &Path, &Path, &OptionValues) -> Result<Outcome>,
    run_analyzed: fn(LabelledSide<'_, '_>, LabelledSide<'_, '_>, &OptionValues) -> Result<Outcome>,
    check: fn() -> std::result::Result<(), String>,
}

impl std::fmt::Debug for RegisteredComparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredComparison")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl RegisteredComparison {
    /// The registration of comparison `C`.
    pub const fn of<C: Comparison + 'static>() -> RegisteredComparison {
        RegisteredComparison {
            name: C::NAME,
            summary: C::SUMMARY,
            window: C::WINDOW,
            doc: C::DOC,
            examples: C::EXAMPLES,
            options: C::OPTIONS,
            tables: C::TABLES,
            reads: C::READS,
            in_report: C::IN_REPORT,
            short_flags: C::SHORT_FLAGS,
            run_inputs: run_inputs::<C>,
            run_analyzed: run_analyzed::<C>,
            check: check::<C>,
        }
    }

    /// The snake_case name.
    pub fn python_name(&self) -> String {
        self.name.replace('-', "_")
    }

    /// What it declares, for the front ends that describe it.
    pub fn declaration(&self) -> Declaration {
        Declaration {
            name: self.name,
            summary: self.summary,
            window: self.window,
            doc: self.doc,
            examples: self.examples,
            options: self.options,
            tables: self.tables,
            in_report: self.in_report,
            short_flags: self.short_flags,
            inputs: Inputs::Two,
        }
    }

    /// The table called `name`, or the main table when `None`.
    pub fn table(&self, name: Option<&str>) -> Result<&'static TableSpec> {
        table_named(self.name, self.tables, name)
    }

    /// Opens A (`a`: a trace file, a directory of ranks or a profile directory) with what the
    /// comparison reads, reduces it to its side and drops it; then B; then compares. Each side
    /// is labelled with its path as given.
    pub fn run(
        &self,
        engine: &Engine,
        a: &Path,
        b: &Path,
        options: &OptionValues,
    ) -> Result<Outcome> {
        (self.run_inputs)(engine, a, b, options)
    }

    /// Compares two profiles already open and analysed (Python's profiles, the report's
    /// baseline and its profile).
    pub fn run_analyzed(
        &self,
        a: LabelledSide<'_, '_>,
        b: LabelledSide<'_, '_>,
        options: &OptionValues,
    ) -> Result<Outcome> {
        (self.run_analyzed)(a, b, options)
    }

    /// Whether the declaration holds together (as [`crate::registry::Registered::check`]),
    /// its table names unique among every analysis's and comparison's.
    pub fn check(&self) -> std::result::Result<(), String> {
        (self.check)()?;
        let all = (crate::registry::ANALYSES.iter().flat_map(|a| a.tables))
            .chain(COMPARISONS.iter().flat_map(|c| c.tables));
        unique_tables(self.name, self.tables, all)
    }
}

fn check<C: Comparison>() -> std::result::Result<(), String> {
    check_declared::<C::Options>(C::NAME, C::OPTIONS, C::TABLES)
}

fn typed<C: Comparison>(values: &OptionValues) -> Result<C::Options> {
    options_of(C::NAME, C::OPTIONS, values, C::check_options)
}

/// `C`'s side of one input, the input named in the error when it cannot be computed.
fn side_of<C: Comparison>(engine: &Engine, input: &Path, options: &C::Options) -> Result<C::Side> {
    let import = import_options(engine, C::READS)?;
    let trace = engine.load(&[input.to_path_buf()], &import)?;
    C::side(&Analyzed::new(&trace), options)
        .map_err(|e| EngineError::Analysis(format!("{}: {e}", input.display())))
}

fn run_inputs<C: Comparison + 'static>(
    engine: &Engine,
    a: &Path,
    b: &Path,
    values: &OptionValues,
) -> Result<Outcome> {
    let options = typed::<C>(values)?;
    let side_a = side_of::<C>(engine, a, &options)?;
    let side_b = side_of::<C>(engine, b, &options)?;
    let (label_a, label_b) = (a.display().to_string(), b.display().to_string());
    let output = C::compare(&label_a, &side_a, &label_b, &side_b, &options)
        .map_err(|e| EngineError::Analysis(e.0))?;
    Ok(Outcome::compared::<C>(output, options))
}

fn run_analyzed<C: Comparison + 'static>(
    a: LabelledSide<'_, '_>,
    b: LabelledSide<'_, '_>,
    values: &OptionValues,
) -> Result<Outcome> {
    let options = typed::<C>(values)?;
    let failed = |label: &str| {
        let label = label.to_owned();
        move |e: strato_analysis::registry::AnalysisError| {
            EngineError::Analysis(format!("{label}: {e}"))
        }
    };
    let side_a = C::side(a.1, &options).map_err(failed(a.0))?;
    let side_b = C::side(b.1, &options).map_err(failed(b.0))?;
    let output =
        C::compare(a.0, &side_a, b.0, &side_b, &options).map_err(|e| EngineError::Analysis(e.0))?;
    Ok(Outcome::compared::<C>(output, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_comparison_holds_together() {
        for c in COMPARISONS {
            c.check().unwrap_or_else(|e| panic!("{e}"));
            assert!(!c.examples.is_empty(), "{}: no example", c.name);
            let doc = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(c.doc);
            assert!(doc.is_file(), "{}: no doc page {}", c.name, c.doc);
            assert_eq!(find_comparison(c.name).map(|f| f.name), Some(c.name));
            assert!(
                crate::registry::find(c.name).is_none(),
                "{}: also an analysis",
                c.name
            );
        }
    }
}

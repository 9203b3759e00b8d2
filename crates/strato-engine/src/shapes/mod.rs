//! Result shapes as the front ends present them: the JSON a command prints with `--json` and
//! the rows the Python API turns into tables are one serde definition per analysis, here, so
//! the CLI and Python cannot drift apart. Analyses whose report is printed as its own serde
//! shape need none.

pub mod critical_path;

//! Exporters: one module per output format.

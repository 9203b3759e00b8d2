//! The checks a query passes before it is planned: its size, how deeply its expressions nest
//! and how many query blocks and relations it holds. They exist because DataFusion plans and
//! optimises recursively: an `a OR b OR ...` filter of thousands of terms, or a `1+1+...` sum,
//! is a chain as deep as it is long, and planning it overflows any fixed stack (the process
//! dies with SIGSEGV/SIGABRT instead of an error). With these bounds the depth of everything
//! the planner recurses over is bounded, and the query threads are given a stack that holds
//! the deepest query allowed (`Session`'s `QUERY_THREAD_STACK_BYTES`; a test plans and runs a
//! query at each limit).
//!
//! What is counted (see [`QueryShape`]):
//! - the query text's length in bytes;
//! - expression depth: the longest chain of nested expressions (`a OR b OR c` is 3 deep,
//!   `f(g(x))` 3, a flat `x IN (1, 2, ...)` 2 whatever its length);
//! - query blocks: `SELECT`s (each side of a `UNION`, every subquery, every CTE) plus table
//!   references (each table, join operand or derived table in a `FROM`); both make plan nodes
//!   the planner nests, and a `UNION` chain or a join chain is as deep as it is long.
//!
//! The parser's own nesting limit (parentheses, subqueries: 50) still applies on top.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{Expr, Select, Statement, TableFactor, Visit, Visitor};

/// What a query may hold (see the module docs). [`Default`] is the limits of `strato sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Most bytes of query text.
    pub max_query_bytes: usize,
    /// Deepest chain of nested expressions.
    pub max_expression_depth: usize,
    /// Most `SELECT` blocks plus table references.
    pub max_query_blocks: usize,
}

/// Largest query text: 128 KiB, Linux's limit on one command-line argument (so no query the
/// CLI can be given is refused for its length alone).
pub const MAX_QUERY_BYTES: usize = 128 << 10;
/// Deepest expression: 1000 (`a OR b OR ...` of 1000 terms; use `x IN (...)` for longer lists).
pub const MAX_EXPRESSION_DEPTH: usize = 1000;
/// Most `SELECT` blocks plus table references: 500.
pub const MAX_QUERY_BLOCKS: usize = 500;

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_query_bytes: MAX_QUERY_BYTES,
            max_expression_depth: MAX_EXPRESSION_DEPTH,
            max_query_blocks: MAX_QUERY_BLOCKS,
        }
    }
}

/// The measures of one parsed statement that [`QueryLimits`] bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryShape {
    /// Deepest chain of nested expressions.
    pub expression_depth: usize,
    /// `SELECT` blocks plus table references.
    pub query_blocks: usize,
}

/// Refuses a query text longer than the limit, before it is parsed. The message is one line.
pub fn check_size(sql: &str, limits: &QueryLimits) -> Result<(), String> {
    if sql.len() > limits.max_query_bytes {
        return Err(format!(
            "the query is {} bytes, more than the limit of {} KiB",
            sql.len(),
            limits.max_query_bytes >> 10
        ));
    }
    Ok(())
}

/// The shape of `statement`. The walk stops as soon as a measure passes `limits` (so that a
/// hostile statement costs no more than a legal one), and the shape returned is then the one
/// measured so far, past the limit.
pub fn shape(statement: &DfStatement, limits: &QueryLimits) -> QueryShape {
    let mut counter = ShapeCounter {
        limits: *limits,
        depth: 0,
        shape: QueryShape::default(),
    };
    let _ = visit_df(statement, &mut counter);
    counter.shape
}

/// Refuses a parsed statement whose shape passes `limits`, with one line saying which limit.
pub fn check_shape(statement: &DfStatement, limits: &QueryLimits) -> Result<QueryShape, String> {
    let shape = shape(statement, limits);
    if shape.expression_depth > limits.max_expression_depth {
        return Err(format!(
            "an expression nests more than {} deep (a long `OR`/`AND`/`+` chain?): \
             use `x IN (...)`, or split the query",
            limits.max_expression_depth
        ));
    }
    if shape.query_blocks > limits.max_query_blocks {
        return Err(format!(
            "the query holds more than {} SELECT blocks and table references",
            limits.max_query_blocks
        ));
    }
    Ok(shape)
}

fn visit_df(statement: &DfStatement, counter: &mut ShapeCounter) -> ControlFlow<()> {
    match statement {
        DfStatement::Statement(s) => visit_sql(s, counter),
        DfStatement::Explain(explain) => visit_df(&explain.statement, counter),
        // DDL and DML (refused later by the read-only rule) and `RESET`: nothing to plan deeply
        // that the read-only rule lets through.
        DfStatement::CreateExternalTable(_) | DfStatement::CopyTo(_) | DfStatement::Reset(_) => {
            ControlFlow::Continue(())
        }
    }
}

fn visit_sql(statement: &Statement, counter: &mut ShapeCounter) -> ControlFlow<()> {
    statement.visit(counter)
}

struct ShapeCounter {
    limits: QueryLimits,
    depth: usize,
    shape: QueryShape,
}

impl ShapeCounter {
    fn block(&mut self) -> ControlFlow<()> {
        self.shape.query_blocks += 1;
        if self.shape.query_blocks > self.limits.max_query_blocks {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

impl Visitor for ShapeCounter {
    type Break = ();

    fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
        self.depth += 1;
        self.shape.expression_depth = self.shape.expression_depth.max(self.depth);
        if self.depth > self.limits.max_expression_depth {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, _select: &Select) -> ControlFlow<()> {
        self.block()
    }

    fn pre_visit_table_factor(&mut self, _table: &TableFactor) -> ControlFlow<()> {
        self.block()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::parser::DFParser;

    fn parse(sql: &str) -> DfStatement {
        let mut statements = DFParser::parse_sql(sql).unwrap();
        statements.pop_front().unwrap()
    }

    fn shape_of(sql: &str) -> QueryShape {
        shape(&parse(sql), &QueryLimits::default())
    }

    #[test]
    fn depth_and_blocks_are_counted_as_documented() {
        // Known by construction: an n-term OR chain is n expressions deep (n - 1 ORs, each
        // one deeper, and the leaf comparison's operand).
        let or_chain = |n: usize| {
            let terms: Vec<String> = (1..=n).map(|i| format!("x = {i}")).collect();
            format!("SELECT 1 FROM t WHERE {}", terms.join(" OR "))
        };
        // `x = 1` is 2 deep (the comparison, then `x` or `1`); each OR adds one level.
        assert_eq!(shape_of(&or_chain(1)).expression_depth, 2);
        assert_eq!(shape_of(&or_chain(10)).expression_depth, 11);
        let flat = format!(
            "SELECT 1 FROM t WHERE x IN ({})",
            (0..3000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(shape_of(&flat).expression_depth, 2);
        assert_eq!(shape_of("SELECT 1").query_blocks, 1);
        assert_eq!(
            shape_of("SELECT 1 FROM a JOIN b ON a.x = b.x").query_blocks,
            3
        );
        assert_eq!(
            shape_of("SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3").query_blocks,
            3
        );
        assert_eq!(
            shape_of("WITH c AS (SELECT x FROM t) SELECT x FROM c WHERE x IN (SELECT x FROM u)")
                .query_blocks,
            // three SELECTs, three table references
            6
        );
    }

    #[test]
    fn limits_refuse_with_one_line() {
        let limits = QueryLimits {
            max_query_bytes: 100,
            max_expression_depth: 5,
            max_query_blocks: 3,
        };
        assert!(check_size(&"x".repeat(100), &limits).is_ok());
        let e = check_size(&"x".repeat(101), &limits).unwrap_err();
        assert!(e.contains("101 bytes"), "{e}");
        assert!(check_shape(&parse("SELECT 1 + 1 + 1 + 1"), &limits).is_ok());
        let e = check_shape(&parse("SELECT 1 + 1 + 1 + 1 + 1 + 1"), &limits).unwrap_err();
        assert!(e.contains("more than 5 deep"), "{e}");
        assert!(check_shape(&parse("SELECT 1 FROM a JOIN b ON true"), &limits).is_ok());
        let e = check_shape(&parse("SELECT 1 FROM a, b, c"), &limits).unwrap_err();
        assert!(e.contains("more than 3 SELECT"), "{e}");
        for e in [
            check_shape(&parse("SELECT 1 + 1 + 1 + 1 + 1 + 1"), &limits).unwrap_err(),
            check_size(&"x".repeat(101), &limits).unwrap_err(),
        ] {
            assert!(!e.contains('\n'), "{e}");
        }
    }
}

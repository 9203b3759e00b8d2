//! Cancelling a running query so that its CPU-bound operators actually stop. Dropping a query's
//! stream stops an operator only when it next yields to the runtime, and some never do while
//! they have input (a nested-loop join feeding an aggregation computes batch after batch inside
//! one poll: measured, a cancelled triple cross join kept burning CPU). So every operator's
//! output goes through [`Cancellable`], which checks the query's cancel flag at each batch and
//! ends the stream with an error once it is set: the consumer stops at its next batch.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;

/// The message a cancelled operator ends with (the session reports the timeout instead).
pub const CANCELLED: &str = "the query was cancelled";

/// `plan` with a [`Cancellable`] over every operator (children first), all watching `flag`.
pub fn cancellable(
    plan: Arc<dyn ExecutionPlan>,
    flag: &Arc<AtomicBool>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let children = plan
        .children()
        .into_iter()
        .map(|child| cancellable(Arc::clone(child), flag))
        .collect::<Result<Vec<_>>>()?;
    let plan = if children.is_empty() {
        plan
    } else {
        datafusion::physical_plan::execution_plan::replace_children_if_necessary(plan, children)?
    };
    let properties = Arc::clone(plan.properties());
    Ok(Arc::new(Cancellable {
        input: plan,
        flag: Arc::clone(flag),
        properties,
    }))
}

/// An operator's output, passed through unchanged until the cancel flag is set.
#[derive(Debug)]
pub struct Cancellable {
    input: Arc<dyn ExecutionPlan>,
    flag: Arc<AtomicBool>,
    properties: Arc<PlanProperties>,
}

impl DisplayAs for Cancellable {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Cancellable")
    }
}

#[allow(deprecated)] // `with_new_children` is the method DataFusion 55 still requires
impl ExecutionPlan for Cancellable {
    fn name(&self) -> &str {
        "Cancellable"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    /// No expressions of its own: it passes its input's batches through.
    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(
            &Arc<dyn datafusion::physical_plan::PhysicalExpr>,
        ) -> Result<datafusion::common::tree_node::TreeNodeRecursion>,
    ) -> Result<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[Arc<dyn ExecutionPlan>; 1]>::try_from(children)
            .map_err(|_| DataFusionError::Internal("Cancellable takes one child".to_owned()))?;
        let properties = Arc::clone(input.properties());
        Ok(Arc::new(Cancellable {
            input,
            flag: Arc::clone(&self.flag),
            properties,
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let flag = Arc::clone(&self.flag);
        let stream = input.map(move |batch| {
            if flag.load(Ordering::Relaxed) {
                Err(DataFusionError::Execution(CANCELLED.to_owned()))
            } else {
                batch
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

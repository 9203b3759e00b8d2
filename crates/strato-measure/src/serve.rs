//! The `strato measure --serve` protocol (JSON lines), typed as the worker's protocol is
//! ([`crate::protocol`]): [`ServeRequest`] in, [`ServeReply`] out. The serving loop is the
//! CLI's (`strato measure --serve`); the Python API (`stratoscope.measure.MeasureServer`) is
//! its client.

use serde::{Deserialize, Serialize};

use crate::engine::{CandidateResult, RunReport};

/// `strato measure --serve`: one request per line on stdin (JSON), one [`ServeReply`] line per
/// request on stdout. The Python API (`stratoscope.measure.MeasureServer`) speaks it.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ServeRequest {
    /// Measure a tuner batch; REACT's state carries over to the next batch. `candidates` is a
    /// candidate list as `strato measure CANDIDATES` reads it ([`crate::candidate::parse_list`]).
    Measure {
        #[serde(default = "empty_list")]
        candidates: serde_json::Value,
    },
    /// Rank selection over everything measured since the last `finish`; replies with the report.
    Finish,
    /// End the server (no reply).
    Shutdown,
}

fn empty_list() -> serde_json::Value {
    serde_json::Value::Array(Vec::new())
}

impl ServeRequest {
    /// The request on one line, or the error reply's message.
    pub fn parse(line: &str) -> std::result::Result<ServeRequest, String> {
        serde_json::from_str(line).map_err(|e| format!("bad request: {e}"))
    }
}

/// The reply to one [`ServeRequest`] (JSON, one line).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ServeReply<'a> {
    /// To `measure`: the batch's results and the parallelism it ran with.
    Measured {
        dp: usize,
        results: &'a [CandidateResult],
    },
    /// To `finish`: the run's report.
    Finished(&'a RunReport),
    /// A request that could not be served; the server goes on.
    Error { error: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_by_op_and_anything_else_is_a_bad_request() {
        let m = ServeRequest::parse(r#"{"op":"measure","candidates":[{"name":"a"}]}"#);
        assert!(
            matches!(m, Ok(ServeRequest::Measure { candidates }) if candidates[0]["name"] == "a")
        );
        // No candidates: an empty batch, not an error.
        let empty = ServeRequest::parse(r#"{"op":"measure"}"#);
        assert!(
            matches!(empty, Ok(ServeRequest::Measure { candidates }) if candidates == serde_json::json!([]))
        );
        assert!(matches!(
            ServeRequest::parse(r#"{"op":"finish"}"#),
            Ok(ServeRequest::Finish)
        ));
        assert!(matches!(
            ServeRequest::parse(r#"{"op":"shutdown"}"#),
            Ok(ServeRequest::Shutdown)
        ));
        for bad in [
            r#"{"op":"launch"}"#,
            r#"{"candidates":[]}"#,
            "not json",
            r#"{"op":3}"#,
        ] {
            match ServeRequest::parse(bad) {
                Err(message) => assert!(message.starts_with("bad request: "), "{bad}: {message}"),
                Ok(r) => panic!("{bad} parsed as {r:?}"),
            }
        }
    }

    #[test]
    fn replies_are_the_objects_the_python_client_reads() {
        let measured = serde_json::to_value(ServeReply::Measured {
            dp: 2,
            results: &[],
        })
        .unwrap_or_default();
        assert_eq!(measured, serde_json::json!({"dp": 2, "results": []}));
        let error = serde_json::to_value(ServeReply::Error {
            error: "bad request: x".into(),
        })
        .unwrap_or_default();
        assert_eq!(error, serde_json::json!({"error": "bad request: x"}));
    }
}

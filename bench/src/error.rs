//! Benchmark errors.
//!
//! A message shows its cause (`…: {0}`), and the cause is not also
//! returned by [`std::error::Error::source`]: a chain printer (anyhow's
//! `{:#}`, as `migrate bench` prints errors) shows it once — the rule of
//! every error type in the workspace.

use lockshift_store::StoreError;

/// The benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The store failed (connecting, creating the schema, measuring).
    #[error("store: {0}")]
    Store(StoreError),
    /// Settings or ids were invalid.
    #[error("invalid setting: {0}")]
    Setting(String),
    /// The in-process endpoint could not start.
    #[error("local endpoint: {0}")]
    Endpoint(lockshift_cql_emulator::EmulatorError),
    /// A worker process could not be run or talked to.
    #[error("worker {worker}: {message}")]
    Worker {
        /// The worker index.
        worker: u32,
        /// What went wrong, with its stderr when it has one.
        message: String,
    },
    /// Reading or writing a pipe or file failed.
    #[error("i/o: {0}")]
    Io(std::io::Error),
    /// A report did not (de)serialise.
    #[error("report: {0}")]
    Json(serde_json::Error),
    /// A benchmark's own acquisition or release failed.
    #[error("lock: {0}")]
    Lock(String),
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
}

// By hand, where thiserror's `#[from]` would also chain the cause.
impl From<StoreError> for BenchError {
    fn from(e: StoreError) -> Self {
        BenchError::Store(e)
    }
}

impl From<lockshift_cql_emulator::EmulatorError> for BenchError {
    fn from(e: lockshift_cql_emulator::EmulatorError) -> Self {
        BenchError::Endpoint(e)
    }
}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> Self {
        BenchError::Io(e)
    }
}

impl From<serde_json::Error> for BenchError {
    fn from(e: serde_json::Error) -> Self {
        BenchError::Json(e)
    }
}

impl From<lockshift_store::settings::InvalidSetting> for BenchError {
    fn from(e: lockshift_store::settings::InvalidSetting) -> Self {
        BenchError::Setting(e.to_string())
    }
}

impl From<lockshift_lock::InvalidId> for BenchError {
    fn from(e: lockshift_lock::InvalidId) -> Self {
        BenchError::Setting(e.to_string())
    }
}

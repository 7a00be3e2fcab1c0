//! Benchmark errors.

use lockshift_store::StoreError;

/// The benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The store failed (connecting, creating the schema, measuring).
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// Settings or ids were invalid.
    #[error("invalid setting: {0}")]
    Setting(String),
    /// The in-process endpoint could not start.
    #[error("local endpoint: {0}")]
    Endpoint(#[from] lockshift_cql_emulator::EmulatorError),
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
    Io(#[from] std::io::Error),
    /// A report did not (de)serialise.
    #[error("report: {0}")]
    Json(#[from] serde_json::Error),
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
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

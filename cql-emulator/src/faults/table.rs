//! Rules as rows of `lockshift_emulator.faults` (the CQL side; the table
//! itself is `engine::virtual_faults`).

use std::time::Duration;

use super::{Fault, FaultOps, FaultRule};
use crate::error::EmulatorError;

/// A rule as the virtual table's columns describe it.
pub(crate) struct RuleRow<'a> {
    pub(crate) fault: Option<&'a str>,
    pub(crate) tables: Vec<String>,
    pub(crate) ops: Option<&'a str>,
    pub(crate) latency_ms: Option<i32>,
    pub(crate) times: Option<i32>,
    pub(crate) probability: Option<f64>,
    pub(crate) seed: Option<i64>,
    pub(crate) after_apply: Option<bool>,
}

impl RuleRow<'_> {
    /// The rule the row describes.
    pub(crate) fn to_rule(&self) -> Result<FaultRule, EmulatorError> {
        let name = self.fault.ok_or_else(|| {
            EmulatorError::InvalidFault("the fault column is required".to_string())
        })?;
        let fault = match name.to_ascii_lowercase().as_str() {
            "latency" => {
                let ms = self.latency_ms.ok_or_else(|| {
                    EmulatorError::InvalidFault("a latency fault needs latency_ms".to_string())
                })?;
                let ms = u64::try_from(ms).map_err(|_| {
                    EmulatorError::InvalidFault("latency_ms must not be negative".to_string())
                })?;
                Fault::Latency(Duration::from_millis(ms))
            }
            "unavailable" => Fault::Unavailable,
            "write_timeout" => Fault::WriteTimeout,
            "read_timeout" => Fault::ReadTimeout,
            "overloaded" => Fault::Overloaded,
            "drop_connection" => Fault::DropConnection,
            other => {
                return Err(EmulatorError::InvalidFault(format!(
                    "unknown fault '{other}' (expected latency, unavailable, write_timeout, \
                     read_timeout, overloaded or drop_connection)"
                )));
            }
        };
        let mut rule = FaultRule::new(fault);
        rule.tables = self.tables.clone();
        if let Some(ops) = self.ops {
            rule.ops = ops.parse()?;
        }
        if let Some(n) = self.times {
            rule.times = Some(u64::try_from(n).map_err(|_| {
                EmulatorError::InvalidFault("times must not be negative".to_string())
            })?);
        }
        if let Some(p) = self.probability {
            rule.probability = Some((p, self.seed.unwrap_or(0) as u64));
        }
        rule.after_apply = self.after_apply.unwrap_or(false);
        Ok(rule)
    }
}

/// The pieces of a rule the virtual table shows.
pub(crate) struct RuleView {
    pub(crate) tables: Vec<String>,
    pub(crate) ops: FaultOps,
    pub(crate) latency: Option<Duration>,
    pub(crate) times: Option<u64>,
    pub(crate) probability: Option<(f64, u64)>,
    pub(crate) after_apply: bool,
}

impl FaultRule {
    pub(crate) fn view(&self) -> RuleView {
        RuleView {
            tables: self.tables.clone(),
            ops: self.ops,
            latency: match self.fault {
                Fault::Latency(d) => Some(d),
                _ => None,
            },
            times: self.times,
            probability: self.probability,
            after_apply: self.after_apply,
        }
    }
}

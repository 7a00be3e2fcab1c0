//! The nodes' clocks ([`NodeClocksReport`]): each node against this
//! client, and the pairs beyond (or not known within) the tolerance.

use std::fmt::Write as _;

use lockshift_decide::offset::fmt_micros;

use super::{Human, Table, age};
use crate::ops::node_clocks::{NodeClocksReport, PairView};

pub(super) fn signed(us: i64) -> String {
    let sign = if us < 0 { "-" } else { "+" };
    format!("{sign}{}", fmt_micros(us.unsigned_abs()))
}

fn pair(p: &PairView) -> String {
    format!(
        "{} and {}: {} ± {} apart",
        p.a,
        p.b,
        fmt_micros(p.spread.difference_us.unsigned_abs()),
        fmt_micros(p.spread.error_us)
    )
}

impl Human for NodeClocksReport {
    /// `node clocks` and its lines, as `status` prints them after its
    /// `clocks` line.
    fn human(&self) -> String {
        let mut s = String::new();
        let tolerance = age(self.tolerance_ms);
        let _ = writeln!(
            s,
            "node clocks must agree within {tolerance}; each read {} times against this client, \
             the fastest kept",
            crate::ops::node_clocks::NODE_CLOCK_SAMPLES
        );
        let mut table = Table::new(&["NODE", "DATACENTER", "CLOCK − THIS CLIENT'S", "ROUND TRIP"]);
        for n in &self.nodes {
            let clock = match (&n.reading, &n.error) {
                (Some(r), _) => format!("{} ± {}", signed(r.offset_us), fmt_micros(r.error_us)),
                (None, Some(e)) => format!("not read: {e}"),
                (None, None) => "not read".to_string(),
            };
            table.row(vec![
                n.address.clone(),
                n.datacenter.clone().unwrap_or_else(|| "-".into()),
                clock,
                n.round_trip_us.map_or("-".into(), fmt_micros),
            ]);
        }
        if table.is_empty() {
            let _ = writeln!(s, "           the store lists no node");
        } else {
            s.push_str(&table.render("           "));
        }
        if let Some(w) = &self.widest {
            let _ = writeln!(s, "           widest: {}", pair(w));
        }
        for p in &self.beyond {
            let _ = writeln!(
                s,
                "BEYOND     {}, more than {tolerance}: a cell can expire for readers coordinated \
                 by one before its owner is told (docs/operating.md §12)",
                pair(p)
            );
        }
        for p in &self.unsure {
            let _ = writeln!(
                s,
                "UNSURE     {}: not known within {tolerance} (read again, or from a client \
                 nearer the nodes)",
                pair(p)
            );
        }
        s
    }
}

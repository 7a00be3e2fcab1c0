//! Datacenters: the name of one, and where a request is coordinated.
//!
//! Cassandra counts `LOCAL_QUORUM` among the replicas of the *coordinator's*
//! datacenter, so read-your-writes (S5, Lemma 1) holds between two requests
//! at `LOCAL_QUORUM` only when one datacenter coordinated both. Which
//! datacenter coordinates a request is therefore part of the request: a
//! [`Route`] (docs/design.md §4a).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::id::LockId;

/// The longest datacenter name accepted. Cassandra takes any string from
/// its snitch; real names are short (`dc1`, `us-east-1`), and every log line
/// and error that concerns a lock's home repeats it.
pub const MAX_DATACENTER_LEN: usize = 64;

/// A datacenter name broke its rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid datacenter name {shown}: {rule}")]
pub struct InvalidDatacenter {
    shown: String,
    rule: &'static str,
}

/// The name of a datacenter, as the cluster's snitch names it (the
/// `data_center` column of `system.local` and `system.peers`; a
/// `NetworkTopologyStrategy` replication key).
///
/// 1 to [`MAX_DATACENTER_LEN`] characters of ASCII letters, digits, `_`,
/// `-`, `.` and `:`. Compared exactly, as Cassandra compares them (`EAST`
/// and `east` are two datacenters).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Datacenter(String);

impl Datacenter {
    /// A datacenter name.
    ///
    /// # Errors
    /// [`InvalidDatacenter`] naming the rule broken, with the name cut short.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidDatacenter> {
        let name = name.into();
        let invalid = |rule| InvalidDatacenter {
            shown: format!("{:?}", crate::id::cut_short(&name)),
            rule,
        };
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if name.len() > MAX_DATACENTER_LEN {
            return Err(invalid("it is longer than 64 characters"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
        {
            return Err(invalid(
                "it may hold only ASCII letters, digits, '_', '-', '.' and ':'",
            ));
        }
        Ok(Datacenter(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Datacenter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Datacenter {
    type Err = InvalidDatacenter;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Datacenter::new(s)
    }
}

impl TryFrom<String> for Datacenter {
    type Error = InvalidDatacenter;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Datacenter::new(s)
    }
}

impl From<Datacenter> for String {
    fn from(dc: Datacenter) -> String {
        dc.0
    }
}

/// Where one store request is coordinated, and so which replicas its
/// consistency level counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Route {
    /// As the store is configured: its consistency level (`QUORUM` unless
    /// `store.cql.consistency = "local_quorum"`), coordinated wherever its
    /// load balancing sends it (the named local datacenter first, when
    /// `store.cql.local_datacenter` is set). Through a homes router, the
    /// home of the row (docs/design.md §4a).
    #[default]
    Default,
    /// Coordinated by a node of this datacenter, at `LOCAL_QUORUM`, and
    /// never sent to another datacenter, even when none of its nodes
    /// answers.
    Datacenter(Datacenter),
    /// Coordinated where this lock's home is *when the request is sent*,
    /// whatever row it names: a fenced write of a service's own table
    /// belongs to the lock whose token it carries (docs/design.md §5, F1).
    /// Through a homes router, the lock's home at `LOCAL_QUORUM`
    /// (`LOCAL_SERIAL` for a fenced write) while the process's view
    /// confirms that home and it serves (H2, H3), else refused without
    /// being sent; the store's default route where no home rule applies.
    /// A store without homes takes it as [`Route::Default`].
    HomeOf(LockId),
    /// Coordinated by the one node at this address (a [`Host`]'s), never
    /// another, even when it does not answer: how a client reads each
    /// node's own clock (docs/design.md §4b). A node alone is no
    /// consistency level, so only a reading of its clock (the store's
    /// `ServerTime` operation) takes this route; a store refuses any other
    /// request on it.
    Host(String),
}

/// One node of the cluster, as its store addresses it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Host {
    /// How the store reaches it ([`Route::Host`]): `ip:port` for a CQL
    /// node; for the embedded store, whose one replica per datacenter
    /// stands for all that datacenter's nodes, the datacenter's name.
    pub address: String,
    /// Its datacenter, when the store knows it.
    pub datacenter: Option<Datacenter>,
}

impl Route {
    /// The datacenter this route pins, if it pins one.
    pub fn datacenter(&self) -> Option<&Datacenter> {
        match self {
            Route::Default | Route::HomeOf(_) | Route::Host(_) => None,
            Route::Datacenter(dc) => Some(dc),
        }
    }

    /// The lock whose home decides this route, if one does.
    pub fn lock(&self) -> Option<&LockId> {
        match self {
            Route::HomeOf(lock) => Some(lock),
            Route::Default | Route::Datacenter(_) | Route::Host(_) => None,
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Default => f.write_str("the store's default route"),
            Route::Datacenter(dc) => write!(f, "LOCAL_QUORUM in {dc}"),
            Route::HomeOf(lock) => write!(
                f,
                "the home of lock {:?}",
                crate::id::cut_short(lock.as_str())
            ),
            Route::Host(address) => {
                write!(f, "the node at {:?} alone", crate::id::cut_short(address))
            }
        }
    }
}

/// What a store knows of the cluster's datacenters — the client's own and
/// every one it has seen — and of its nodes. Empty when the store has no
/// notion of them (one unnamed datacenter).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// The datacenter this client runs in, when it was named
    /// (`store.cql.local_datacenter`; an embedded client's place).
    pub local: Option<Datacenter>,
    /// Every datacenter of the cluster the store knows of, sorted.
    pub datacenters: Vec<Datacenter>,
    /// Every node of the cluster the store knows of, sorted by address:
    /// each reachable alone on [`Route::Host`].
    pub hosts: Vec<Host>,
}

impl Topology {
    /// Whether `route` sends a request out of the client's datacenter: a
    /// pinned route to another datacenter than the named local one.
    /// Unknown (`false`) when no local datacenter is named.
    pub fn crosses(&self, route: &Route) -> bool {
        match (route.datacenter(), &self.local) {
            (Some(dc), Some(local)) => dc != local,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        let cases: &[(&str, bool)] = &[
            ("dc1", true),
            ("us-east-1", true),
            ("DC_2.a:b", true),
            ("", false),
            ("dc 1", false),
            ("dc'1", false),
            ("é", false),
        ];
        for (i, (name, ok)) in cases.iter().enumerate() {
            assert_eq!(Datacenter::new(*name).is_ok(), *ok, "case #{i}: {name:?}");
        }
        let long = "d".repeat(65);
        let e = Datacenter::new(long).unwrap_err();
        assert!(e.to_string().contains("longer than 64"), "{e}");
        assert!(e.to_string().len() < 200, "the name is cut short: {e}");
    }

    #[test]
    fn a_route_crosses_only_to_another_named_datacenter() {
        let dc = |s: &str| Datacenter::new(s).unwrap();
        let here = Topology {
            local: Some(dc("dc1")),
            datacenters: vec![dc("dc1"), dc("dc2")],
            hosts: Vec::new(),
        };
        assert!(!here.crosses(&Route::Default));
        assert!(!here.crosses(&Route::Datacenter(dc("dc1"))));
        assert!(here.crosses(&Route::Datacenter(dc("dc2"))));
        assert!(!Topology::default().crosses(&Route::Datacenter(dc("dc2"))));
        // Where a lock's home is is known only to a homes router.
        let x = Route::HomeOf(LockId::new("X").unwrap());
        assert!(!here.crosses(&x));
        assert_eq!(x.datacenter(), None);
        assert_eq!(x.lock().map(LockId::as_str), Some("X"));
        assert_eq!(x.to_string(), "the home of lock \"X\"");
        // A node alone pins no datacenter.
        let node = Route::Host("127.0.0.70:9042".into());
        assert!(!here.crosses(&node));
        assert_eq!((node.datacenter(), node.lock()), (None, None));
        assert_eq!(node.to_string(), "the node at \"127.0.0.70:9042\" alone");
    }
}

//! Identifiers: locks, nodes, and owners (one per acquisition).
//!
//! What an id is made of when it comes from the operating system (the host
//! name, the process id) or from a random draw is not read here: the
//! constructors take those facts as arguments
//! ([`NodeId::from_process`], [`Incarnation::from_drawn`]), and the lock
//! crate reads them and passes them in.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An identifier broke its rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid id: {0}")]
pub struct InvalidId(String);

impl InvalidId {
    pub(crate) fn new(message: String) -> Self {
        InvalidId(message)
    }
}

/// The longest lock id accepted. Lock ids are row keys; Cassandra allows 64 KiB
/// but an id that long is a bug, and ids appear in every log line.
pub const MAX_LOCK_ID_LEN: usize = 256;

/// The longest node id accepted (it prefixes every owner id).
pub const MAX_NODE_ID_LEN: usize = 64;

/// The name of a lock: the row key of its cells in every table.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LockId(String);

impl LockId {
    /// A lock id: 1 to [`MAX_LOCK_ID_LEN`] bytes of printable characters
    /// without whitespace at either end.
    ///
    /// # Errors
    /// [`InvalidId`] naming the rule broken.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidId> {
        let id = id.into();
        check_printable("lock id", &id, MAX_LOCK_ID_LEN)?;
        Ok(LockId(id))
    }

    /// The id as a string (the row key).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for LockId {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LockId::new(s)
    }
}

impl TryFrom<String> for LockId {
    type Error = InvalidId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        LockId::new(s)
    }
}

impl From<LockId> for String {
    fn from(id: LockId) -> String {
        id.0
    }
}

impl TryFrom<&str> for LockId {
    type Error = InvalidId;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        LockId::new(s)
    }
}

impl TryFrom<&String> for LockId {
    type Error = InvalidId;
    fn try_from(s: &String) -> Result<Self, Self::Error> {
        LockId::new(s.as_str())
    }
}

/// So that `acquire(&id)` works wherever `acquire("name")` does.
impl From<&LockId> for LockId {
    fn from(id: &LockId) -> Self {
        id.clone()
    }
}

/// The identity of one service process in the fleet (its registry row and the
/// prefix of every owner id it creates).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(String);

impl NodeId {
    /// A node id: 1 to [`MAX_NODE_ID_LEN`] characters of `A-Z a-z 0-9 . _ - :`.
    /// The restriction keeps owner ids (`node/random`) parseable.
    ///
    /// # Errors
    /// [`InvalidId`] naming the rule broken.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidId> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_NODE_ID_LEN {
            return Err(InvalidId::new(format!(
                "node id {:?} must be 1 to {MAX_NODE_ID_LEN} characters long",
                cut_short(&id)
            )));
        }
        if let Some(bad) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')))
        {
            return Err(InvalidId::new(format!(
                "node id {:?} contains {bad:?}; only A-Z, a-z, 0-9, '.', '_', '-' and ':' are allowed",
                cut_short(&id)
            )));
        }
        Ok(NodeId(id))
    }

    /// The node id of a process: `prefix` and `host` (sanitised to the
    /// allowed characters, and cut so the whole id fits
    /// [`MAX_NODE_ID_LEN`]), then `-pid-tag`, where `tag` is the low four
    /// hex digits of `tag`. The caller reads `host` and `pid` from the
    /// operating system and draws `tag` at random once per process start:
    /// the pid alone does not tell processes apart — in a container it is
    /// usually 1, so a replaced pod with a stable host name (a StatefulSet)
    /// would reuse its predecessor's id.
    pub fn from_process(prefix: &str, host: &str, pid: u32, tag: u32) -> Self {
        let tail = format!("-{pid}-{:04x}", tag & 0xffff);
        let mut id: String = prefix
            .chars()
            .chain(host.chars())
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .take(MAX_NODE_ID_LEN - tail.len())
            .collect();
        id.push_str(&tail);
        NodeId(id)
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for NodeId {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeId::new(s)
    }
}

impl TryFrom<String> for NodeId {
    type Error = InvalidId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        NodeId::new(s)
    }
}

impl From<NodeId> for String {
    fn from(id: NodeId) -> String {
        id.0
    }
}

/// One running process of a node: drawn at random when the process starts
/// (from the seed in simulations). Two processes that share a node id — a
/// replacement started before its predecessor stopped, a StatefulSet pod,
/// a `node.id` two copies of a config file share — are two incarnations,
/// each with a registry row of its own (docs/design.md §4, R5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Incarnation(u32);

impl Incarnation {
    /// The incarnation derived from `seed` (simulations): a mix of the
    /// seed, so that nearby seeds differ in every digit.
    pub fn from_seed(seed: u64) -> Self {
        Incarnation((seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32)
    }

    /// The incarnation `drawn`, a number the caller drew at random when the
    /// process started.
    pub fn from_drawn(drawn: u32) -> Self {
        Incarnation(drawn)
    }

    /// The incarnation as a number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Incarnation {
    /// Eight lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

impl FromStr for Incarnation {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(InvalidId::new(format!(
                "incarnation {:?} is not eight hex digits",
                cut_short(s)
            )));
        }
        u32::from_str_radix(s, 16)
            .map(Incarnation)
            .map_err(|e| InvalidId::new(format!("incarnation {s:?}: {e}")))
    }
}

/// Who holds or waits for a lock: the column name an acquisition writes in
/// `main` and `shadow` (and in the queue), `node/IIIIIIIISSSSSSSS` — the
/// node id, then the writing process's [`Incarnation`] and a slot number,
/// eight hex digits each.
///
/// One acquisition uses an owner id at a time, and the next acquisition of
/// the same lock by the same process reuses it once the previous one's
/// cells are gone (L7): a name reused costs the lock's rows one tombstone,
/// however often (the lock crate's `slots` module). Carrying the node id
/// lets operators (and the legacy-activity detector) tell which node an
/// owner belongs to; binaries that predate lockshift write owner ids
/// without that shape.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OwnerId(String);

impl OwnerId {
    /// The owner id of `node`'s process `incarnation`, slot `slot`.
    pub fn for_slot(node: &NodeId, incarnation: Incarnation, slot: u32) -> Self {
        OwnerId(format!("{node}/{incarnation}{slot:08x}"))
    }

    /// An owner id with a free-form `nonce` (16 hex digits; tests, and the
    /// shape lockshift builds before slots wrote).
    pub fn new(node: &NodeId, nonce: u64) -> Self {
        OwnerId(format!("{node}/{nonce:016x}"))
    }

    /// An owner id read back from the store, as is (it may come from a
    /// binary that predates lockshift).
    pub fn from_stored(column: impl Into<String>) -> Self {
        OwnerId(column.into())
    }

    /// The node that created this owner id, if it has lockshift's shape.
    pub fn node(&self) -> Option<&str> {
        self.parts().map(|(node, _)| node)
    }

    /// The incarnation of the process that wrote this owner id, if it has
    /// lockshift's shape (for builds before slots: the nonce's first half).
    pub fn incarnation(&self) -> Option<Incarnation> {
        let (_, hex) = self.parts()?;
        hex[..8].parse().ok()
    }

    fn parts(&self) -> Option<(&str, &str)> {
        let (node, nonce) = self.0.rsplit_once('/')?;
        (nonce.len() == 16 && nonce.bytes().all(|b| b.is_ascii_hexdigit()) && !node.is_empty())
            .then_some((node, nonce))
    }

    /// The id as a string (the column name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The longest part of a value an error message echoes.
const ECHO_MAX: usize = 64;

/// `s` as an error message may echo it: whole if short, else its first
/// characters and how long it was — a 1 MB node id must not make a 2 MB
/// error.
pub fn cut_short(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= ECHO_MAX {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = ECHO_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…({} bytes)", &s[..end], s.len()))
}

fn check_printable(what: &str, s: &str, max: usize) -> Result<(), InvalidId> {
    if s.is_empty() {
        return Err(InvalidId::new(format!("{what} must not be empty")));
    }
    if s.len() > max {
        return Err(InvalidId::new(format!(
            "{what} is {} bytes long, the limit is {max}",
            s.len()
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(InvalidId::new(format!(
            "{what} {:?} contains a control character",
            cut_short(s)
        )));
    }
    if s.trim() != s {
        return Err(InvalidId::new(format!(
            "{what} {:?} starts or ends with whitespace",
            cut_short(s)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_ids_are_checked() {
        assert!(LockId::new("accounts/42").is_ok());
        let e = LockId::new("").unwrap_err();
        assert_eq!(e.to_string(), "invalid id: lock id must not be empty");
        assert!(
            LockId::new(" x")
                .unwrap_err()
                .to_string()
                .contains("whitespace")
        );
        assert!(
            LockId::new("a\nb")
                .unwrap_err()
                .to_string()
                .contains("control")
        );
        assert!(
            LockId::new("x".repeat(257))
                .unwrap_err()
                .to_string()
                .contains("limit is 256")
        );
    }

    #[test]
    fn slot_owner_ids_carry_node_and_incarnation() {
        let node = NodeId::new("web-1").unwrap();
        let incarnation: Incarnation = "0a1b2c3d".parse().unwrap();
        let owner = OwnerId::for_slot(&node, incarnation, 2);
        assert_eq!(owner.as_str(), "web-1/0a1b2c3d00000002");
        assert_eq!(owner.node(), Some("web-1"));
        assert_eq!(owner.incarnation(), Some(incarnation));
        assert!("0a1b2c3".parse::<Incarnation>().is_err());
        assert!("0a1b2c3z".parse::<Incarnation>().is_err());
    }

    #[test]
    fn owner_ids_carry_their_node() {
        let node = NodeId::new("web-1.dc1").unwrap();
        let owner = OwnerId::new(&node, 0xabc);
        assert_eq!(owner.as_str(), "web-1.dc1/0000000000000abc");
        assert_eq!(owner.node(), Some("web-1.dc1"));
        assert_eq!(
            OwnerId::from_stored("3f2504e0-4f89-11d3-9a0c-0305e82c3301").node(),
            None
        );
        assert_eq!(OwnerId::from_stored("/0000000000000abc").node(), None);
    }
}

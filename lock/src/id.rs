//! Identifiers: locks, nodes, and owners (one per acquisition).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InvalidId;

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

    /// A node id for this process: `host-pid-tag` ([`host_name`],
    /// sanitised to the allowed characters), where `tag` is four hex digits
    /// drawn at random once per process start. The pid alone does not tell
    /// processes apart: in a container it is usually 1, so a replaced pod
    /// with a stable host name (a StatefulSet) would reuse its
    /// predecessor's id. The id is the same for every call in one process.
    pub fn for_this_process() -> Self {
        Self::derived("")
    }

    /// As [`for_this_process`](Self::for_this_process), with `prefix` in
    /// front (`migrate-host-pid-tag` for the operator tool's processes).
    pub fn derived(prefix: &str) -> Self {
        let tail = format!("-{}-{:04x}", std::process::id(), process_tag() & 0xffff);
        let mut id: String = prefix
            .chars()
            .chain(host_name().chars())
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

/// A random number drawn once per process, the same for every call.
fn process_tag() -> u32 {
    static TAG: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *TAG.get_or_init(rand::random)
}

/// One running process of a node: drawn at random when the process starts
/// (from the seed in simulations). Two processes that share a node id — a
/// replacement started before its predecessor stopped, a StatefulSet pod,
/// a `node.id` two copies of a config file share — are two incarnations,
/// each with a registry row of its own (docs/design.md §4, R5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Incarnation(u32);

impl Incarnation {
    /// A fresh incarnation: random, or derived from `seed` (simulations).
    pub fn new(seed: Option<u64>) -> Self {
        match seed {
            // A mix of the seed, so that nearby seeds differ in every digit.
            Some(seed) => Incarnation((seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32),
            None => Incarnation(rand::random()),
        }
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
/// cells are gone (K1): a name reused costs the lock's rows one tombstone,
/// however often (the `slots` module). Carrying the node id lets operators
/// (and the legacy-activity detector) tell which node an owner belongs to;
/// binaries that predate lockshift write owner ids without that shape.
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

/// This machine's host name, as the operating system has it: the kernel's
/// (`/proc/sys/kernel/hostname`, what `uname -n` and `gethostname(2)`
/// report), else `/etc/hostname`, else `localhost`.
///
/// Not `$HOSTNAME`: that is a variable interactive shells set for
/// themselves, and services started by systemd or a container runtime
/// rarely have it — every such node was named `node-<pid>`.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| {
            std::fs::read_to_string(path)
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_string())
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

    #[test]
    fn node_ids_are_checked_and_derived() {
        assert!(NodeId::new("a/b").unwrap_err().to_string().contains("'/'"));
        assert!(NodeId::new("").is_err());
        let here = NodeId::for_this_process();
        assert!(NodeId::new(here.as_str()).is_ok(), "{here}");
    }

    /// Issue 11: the host part comes from the operating system, not from
    /// `$HOSTNAME` (which services rarely have, and which may be anything).
    /// The environment cannot be changed safely inside a test process, so
    /// this test runs itself again with `HOSTNAME=not-this-host`.
    #[test]
    fn node_ids_name_the_os_host() {
        const CHILD: &str = "LOCKSHIFT_TEST_PRINT_NODE_ID";
        if std::env::var_os(CHILD).is_some() {
            println!("node id: {}", NodeId::for_this_process());
            return;
        }
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        if kernel.is_empty() {
            println!("skipped: no /proc/sys/kernel/hostname on this system");
            return;
        }
        assert_eq!(host_name(), kernel);
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "id::tests::node_ids_name_the_os_host",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("HOSTNAME", "not-this-host")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let id = stdout
            .lines()
            .find_map(|l| l.strip_prefix("node id: "))
            .unwrap_or_else(|| panic!("no node id printed: {stdout}"));
        let sanitised: String = kernel
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        assert!(
            id.starts_with(&format!("{sanitised}-")),
            "{id}: the host name must come from the OS, whatever $HOSTNAME says"
        );
    }
}

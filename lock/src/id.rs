//! Identifiers: locks, nodes, and owners (one per acquisition).
//!
//! The ids themselves are pure data and live in `lockshift_decide::id`;
//! the lock API takes them, so this module re-exports them, and it
//! supplies what an id
//! takes from the operating system or a random draw: the host name, the
//! process id and tag ([`node_id_for_this_process`], [`derived_node_id`])
//! and a fresh incarnation ([`new_incarnation`]).

/// The ids (`lockshift_decide::id`), which the lock API takes and returns.
pub use lockshift_decide::id::{
    Incarnation, InvalidId, LockId, MAX_LOCK_ID_LEN, MAX_NODE_ID_LEN, NodeId, OwnerId, cut_short,
};

/// A node id for this process: `host-pid-tag` ([`host_name`], sanitised to
/// the allowed characters), where `tag` is four hex digits drawn at random
/// once per process start. The pid alone does not tell processes apart: in
/// a container it is usually 1, so a replaced pod with a stable host name
/// (a StatefulSet) would reuse its predecessor's id. The id is the same for
/// every call in one process. (Was `NodeId::for_this_process`.)
pub fn node_id_for_this_process() -> NodeId {
    derived_node_id("")
}

/// As [`node_id_for_this_process`], with `prefix` in front
/// (`migrate-host-pid-tag` for the operator tool's processes). Built by
/// [`NodeId::from_process`] from [`host_name`], this process's id and its
/// tag. (Was `NodeId::derived`.)
pub fn derived_node_id(prefix: &str) -> NodeId {
    NodeId::from_process(prefix, &host_name(), std::process::id(), process_tag())
}

/// A random number drawn once per process, the same for every call.
fn process_tag() -> u32 {
    static TAG: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *TAG.get_or_init(rand::random)
}

/// A fresh incarnation: random ([`Incarnation::from_drawn`]), or derived
/// from `seed` (simulations, [`Incarnation::from_seed`]). (Was
/// `Incarnation::new`.)
pub fn new_incarnation(seed: Option<u64>) -> Incarnation {
    match seed {
        Some(seed) => Incarnation::from_seed(seed),
        None => Incarnation::from_drawn(rand::random()),
    }
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
    fn node_ids_are_checked_and_derived() {
        assert!(NodeId::new("a/b").unwrap_err().to_string().contains("'/'"));
        assert!(NodeId::new("").is_err());
        let here = node_id_for_this_process();
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
            println!("node id: {}", node_id_for_this_process());
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

//! Long operator commands (`status`, `clean`) stop cleanly when the
//! operator interrupts them: the work is dropped between two of its
//! requests, the progress line is cleared, a note says what was and was
//! not written, and the exit code is 130.

/// The exit code of a command the operator interrupted (128 + SIGINT).
pub(crate) const INTERRUPTED: i32 = 130;

/// What an interrupted read-only command says.
pub(crate) const INTERRUPTED_READ: &str = "interrupted: nothing was written";

/// What an interrupted `clean --apply` says: each delete is one request,
/// whole or not sent, so no lock is left half-cleaned.
pub(crate) const INTERRUPTED_CLEAN: &str = "interrupted: each cell deleted so far is deleted whole, the others are as they were; `migrate clean` shows what is left";

/// Resolves when the operator interrupts this process: Ctrl-C (SIGINT) or
/// SIGTERM. Both handlers are installed at its first poll; from then on
/// neither signal ends the process by itself.
pub(crate) async fn interrupted() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending().await,
            }
        } => {}
    }
}

/// Runs `work` until it ends or the operator interrupts it
/// ([`interrupted`]): `None` when interrupted. The work is dropped between
/// two requests of its own; every write it makes is one request, so none
/// is left half-written.
pub(crate) async fn until_interrupted<T>(
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<Option<T>> {
    tokio::select! {
        done = work => done.map(Some),
        () = interrupted() => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nix::sys::signal::{Signal, raise};

    use super::*;

    /// Set in the process of its own [`an_interrupt_stops_the_work`] runs
    /// its body in.
    const ALONE: &str = "LOCKSHIFT_TEST_INTERRUPT_ALONE";

    /// Ctrl-C stops the work (here, work that never ends) and says so. The
    /// signal goes to the whole process, and would interrupt any other
    /// test running beside it (a `run-with-lock` test's command ended
    /// early), so the body runs in a process of its own: this test binary
    /// again, this test alone.
    #[test]
    fn an_interrupt_stops_the_work() {
        if std::env::var_os(ALONE).is_some() {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(interrupted_work());
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
            .args([
                "--exact",
                "interrupt::tests::an_interrupt_stops_the_work",
                "--test-threads=1",
            ])
            .env(ALONE, "1")
            .output()
            .expect("the test binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    async fn interrupted_work() {
        let waiting = tokio::spawn(until_interrupted(
            std::future::pending::<anyhow::Result<()>>(),
        ));
        // Let the task install its handlers before the signal is raised.
        tokio::time::sleep(Duration::from_millis(100)).await;
        raise(Signal::SIGINT).expect("raise SIGINT");
        let got = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("stopped within 10 s")
            .expect("the task did not panic");
        assert!(matches!(got, Ok(None)), "{got:?}");
    }

    /// Work that ends is returned as it ended.
    #[tokio::test]
    async fn work_that_ends_is_returned() {
        assert_eq!(until_interrupted(async { Ok(7) }).await.unwrap(), Some(7));
        let failed = until_interrupted(async { Err::<(), _>(anyhow::anyhow!("no")) }).await;
        assert_eq!(failed.unwrap_err().to_string(), "no");
    }
}

use clap::CommandFactory;

use super::*;

#[test]
fn the_cli_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn values_are_checked_at_parse_time() {
    let err = Cli::try_parse_from(["migrate", "advance", "--to", "qeue"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown stage \"qeue\"; expected legacy, dual, queue or complete"),
        "{err}"
    );
    let err = Cli::try_parse_from([
        "migrate",
        "run-with-lock",
        "x",
        "--timeout",
        "3x",
        "--",
        "true",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("--timeout"), "{err}");
    let cli = Cli::try_parse_from([
        "migrate",
        "--json",
        "run-with-lock",
        "x",
        "--contact-points",
        "a:1,b:2",
        "--",
        "sh",
        "-c",
        "echo --json",
    ])
    .unwrap();
    assert!(cli.output.json);
    assert_eq!(cli.connect.contact_points, ["a:1", "b:2"]);
    match cli.command {
        Command::RunWithLock { run, acquire } => {
            assert_eq!(run.command, ["sh", "-c", "echo --json"]);
            assert_eq!(acquire.mode, None, "the settings' node.mode decides");
        }
        other => panic!("{other:?}"),
    }
}

/// `lock` takes run-with-lock's acquisition flags, and no command.
#[test]
fn lock_takes_the_acquisition_flags_and_no_command() {
    let cli = Cli::try_parse_from([
        "migrate",
        "lock",
        "nightly",
        "--timeout",
        "30s",
        "--mode",
        "combined",
        "--fencing-token",
        "optional",
        "--json",
    ])
    .unwrap();
    assert!(cli.output.json);
    match cli.command {
        Command::Lock(AcquireArgs {
            lock,
            mode,
            timeout,
            fencing_token,
            ..
        }) => {
            assert_eq!(lock.as_str(), "nightly");
            assert_eq!(mode, Some(Mode::Combined));
            assert_eq!(timeout, Some(Duration::from_secs(30)));
            assert_eq!(fencing_token, FencingTokenArg::Optional);
        }
        other => panic!("{other:?}"),
    }
    let cli = Cli::try_parse_from(["migrate", "lock", "nightly"]).unwrap();
    match cli.command {
        Command::Lock(args) => {
            assert_eq!((args.timeout, args.mode), (None, None));
            assert_eq!(args.fencing_token, FencingTokenArg::Required);
        }
        other => panic!("{other:?}"),
    }
    for args in [
        &["migrate", "lock", "nightly", "--", "true"][..],
        &["migrate", "lock"][..],
        &["migrate", "lock", "nightly", "--grace", "1s"][..],
    ] {
        let err = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
    }
    // A long lock id is refused with the value cut short.
    let long = "x".repeat(1_000);
    let err = Cli::try_parse_from(["migrate", "lock", &long]).unwrap_err();
    assert!(err.to_string().len() < 600, "{err}");
}

/// Issue 42 item 5: `--consistency` is spelt as the settings and every
/// message spell it (`local_quorum`), and the kebab spelling it had is
/// still taken.
#[test]
fn consistency_is_spelt_as_the_settings_spell_it() {
    for spelling in ["local_quorum", "local-quorum"] {
        let cli = Cli::try_parse_from(["migrate", "status", "--consistency", spelling]).unwrap();
        assert_eq!(
            cli.connect.consistency,
            Some(ConsistencyArg::LocalQuorum),
            "{spelling}"
        );
    }
    let e = Cli::try_parse_from(["migrate", "status", "--consistency", "one"]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("[possible values: quorum, local_quorum]"),
        "{text}"
    );
    assert!(!text.contains("local-quorum"), "{text}");
}

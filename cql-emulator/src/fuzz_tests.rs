//! Robustness (the crate's invariant 3): property-based fuzzing of the
//! frame decoder and of the parser + compiler + executor, and a replay of
//! the corpus in `tests/corpus/` so every input that once broke something
//! stays tested.
//!
//! The properties are "never panics" (a panic fails the test) plus, for the
//! corpus, the recorded outcome of each statement.

use std::path::PathBuf;

use proptest::prelude::*;

use crate::engine::tests::Db;
use crate::frame::{self, HEADER_LEN, HeaderCheck};
use crate::messages;
use crate::wire::Value;

/// Runs a raw frame through everything a connection does before the engine.
fn decode_frame(bytes: &[u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&bytes[..HEADER_LEN]);
    if let HeaderCheck::Request(h) = frame::check_header(&header, 1 << 20) {
        let body = &bytes[HEADER_LEN..];
        let body = &body[..body.len().min(h.length)];
        if let Ok(b) = frame::request_body(&h, body) {
            let _ = messages::decode(h.opcode, b);
        }
    }
}

/// A request header for `opcode` in front of `body`.
fn framed(opcode: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![4, flags, 0, 1, opcode];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Parses, compiles and runs `cql` on `db`, with `values` if it has markers.
fn run_cql(db: &mut Db, cql: &str, values: &[Value]) -> Result<(), String> {
    let p = db.prepare(cql).map_err(|e| e.message)?;
    let vals: Vec<Value> = (0..p.binds.len())
        .map(|i| values.get(i).cloned().unwrap_or(Value::Unset))
        .collect();
    db.exec(&p, &vals, Some(3), None)
        .map(|_| ())
        .map_err(|e| e.message)
}

const WORDS: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "FROM",
    "WHERE",
    "AND",
    "IN",
    "INTO",
    "VALUES",
    "USING",
    "TTL",
    "TIMESTAMP",
    "LIMIT",
    "ORDER",
    "BY",
    "DESC",
    "ASC",
    "DISTINCT",
    "token",
    "writetime",
    "ttl",
    "count",
    "BEGIN",
    "BATCH",
    "APPLY",
    "UNLOGGED",
    "CREATE",
    "TABLE",
    "KEYSPACE",
    "IF",
    "NOT",
    "EXISTS",
    "DROP",
    "PRIMARY",
    "KEY",
    "WITH",
    "CLUSTERING",
    "SET",
    "ks.main",
    "main",
    "row_key",
    "column_name",
    "value",
    "ks",
    "*",
    "(",
    ")",
    ",",
    ";",
    "=",
    "<",
    "<=",
    ">",
    ">=",
    "?",
    ":n",
    "'r'",
    "'c'",
    "0x00",
    "1",
    "-1",
    "9223372036854775807",
    "null",
    "{",
    "}",
    "[",
    "]",
    ":",
    "text",
    "int",
    "frozen<list<int>>",
    "ALLOW",
    "FILTERING",
    "USE",
    "TRUNCATE",
    "PER",
    "PARTITION",
    "now()",
    "'",
    "\"",
    "$$",
    "/*",
    "--",
];

fn cql_soup() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(WORDS), 0..24).prop_map(|w| w.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn frame_decoder_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        decode_frame(&bytes);
    }

    #[test]
    fn frame_decoder_never_panics_on_well_framed_bodies(
        opcode in prop_oneof![Just(1u8), Just(5), Just(7), Just(9), Just(10), Just(11), Just(13), any::<u8>()],
        flags in prop_oneof![Just(0u8), Just(4), any::<u8>()],
        body in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        decode_frame(&framed(opcode, flags, &body));
    }

    #[test]
    fn parser_never_panics_on_text(text in "\\PC{0,80}") {
        let _ = crate::parse::parse(&text);
    }

    #[test]
    fn engine_never_panics_on_cql_soup(text in cql_soup(), vals in proptest::collection::vec(
        prop_oneof![Just(Value::Null), Just(Value::Unset), proptest::collection::vec(any::<u8>(), 0..9).prop_map(Value::Bytes)], 0..6)
    ) {
        let mut db = Db::lockshift();
        let _ = run_cql(&mut db, &text, &vals);
    }
}

fn corpus_dir(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind)
}

fn files(kind: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpus_dir(kind))
        .unwrap_or_else(|e| panic!("corpus {kind}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

/// Every frame in `tests/corpus/frames/*.hex` (hex digits, whitespace and
/// `#` comments ignored) decodes without panicking.
#[test]
fn frame_corpus_replays() {
    let files = files("frames");
    assert!(!files.is_empty());
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let hex: String = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .flat_map(|l| l.chars().filter(char::is_ascii_hexdigit))
            .collect();
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        decode_frame(&bytes);
    }
}

/// Every line of `tests/corpus/cql/*.cql` is `ok <statement>`,
/// `err <statement>` or `any <statement>`, run in order on one engine that
/// starts with `ks.main` in lockshift's shape.
#[test]
fn cql_corpus_replays_with_recorded_outcomes() {
    let files = files("cql");
    assert!(!files.is_empty());
    for path in files {
        let mut db = Db::lockshift();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (want, cql) = line.split_once(' ').unwrap_or((line, ""));
            let got = run_cql(&mut db, cql, &[]);
            let where_ = format!("{}:{}", path.display(), n + 1);
            match want {
                "ok" => assert!(got.is_ok(), "{where_}: {cql} failed: {got:?}"),
                "err" => assert!(got.is_err(), "{where_}: {cql} succeeded"),
                "any" => {}
                other => panic!("{where_}: unknown outcome '{other}'"),
            }
        }
    }
}

//! Errors: the public [`EmulatorError`] (starting an endpoint, configuring
//! faults) and the crate-internal [`CqlError`], one CQL `ERROR` response.

use std::io;
use std::net::SocketAddr;

use crate::wire::Writer;

/// Starting or configuring an endpoint failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmulatorError {
    /// The listening socket could not be bound.
    #[error("could not listen for CQL clients on {addr}: {error}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the operating system said (shown in the message, not
        /// chained: a chain printer would say it twice).
        error: io::Error,
    },
    /// The bound socket's address could not be read back.
    #[error("could not read the CQL endpoint's bound address: {0}")]
    LocalAddr(io::Error),
    /// A fault rule was rejected (a probability outside 0..=1, an unknown
    /// operation or fault name).
    #[error("invalid fault rule: {0}")]
    InvalidFault(String),
}

/// What a CQL `ERROR` response carries beyond its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// 0x0000: a bug or an unexpected state in the server.
    Server,
    /// 0x000A: the client broke the protocol.
    Protocol,
    /// 0x1000: not enough replicas alive.
    Unavailable {
        consistency: u16,
        required: i32,
        alive: i32,
    },
    /// 0x1001: the coordinator is overloaded.
    Overloaded,
    /// 0x1100: replicas did not acknowledge a write in time.
    WriteTimeout {
        consistency: u16,
        received: i32,
        block_for: i32,
        write_type: &'static str,
    },
    /// 0x1200: replicas did not answer a read in time.
    ReadTimeout {
        consistency: u16,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// 0x1300: replicas failed a read (here: too many tombstones). The v4
    /// body Cassandra 4.1.1 sends: consistency, received, block-for,
    /// number of failures, data present (the reason codes are v5's).
    ReadFailure {
        consistency: u16,
        received: i32,
        block_for: i32,
        num_failures: i32,
        data_present: bool,
    },
    /// 0x2000: the statement does not parse.
    Syntax,
    /// 0x2100: the statement is not allowed (writing a system table).
    Unauthorized,
    /// 0x2200: the statement parses but is wrong.
    Invalid,
    /// 0x2400: CREATE of something that exists.
    AlreadyExists { keyspace: String, table: String },
    /// 0x2500: EXECUTE of an id this server does not know.
    Unprepared { id: Vec<u8> },
}

/// One CQL error response: a kind and a message for a person.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct CqlError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl CqlError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CqlError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Protocol, message)
    }

    pub(crate) fn syntax(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Syntax, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    pub(crate) fn server(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Server, message)
    }

    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, message)
    }

    /// The protocol's error code.
    pub(crate) fn code(&self) -> i32 {
        match self.kind {
            ErrorKind::Server => 0x0000,
            ErrorKind::Protocol => 0x000A,
            ErrorKind::Unavailable { .. } => 0x1000,
            ErrorKind::Overloaded => 0x1001,
            ErrorKind::WriteTimeout { .. } => 0x1100,
            ErrorKind::ReadTimeout { .. } => 0x1200,
            ErrorKind::ReadFailure { .. } => 0x1300,
            ErrorKind::Syntax => 0x2000,
            ErrorKind::Unauthorized => 0x2100,
            ErrorKind::Invalid => 0x2200,
            ErrorKind::AlreadyExists { .. } => 0x2400,
            ErrorKind::Unprepared { .. } => 0x2500,
        }
    }

    /// The `ERROR` body: code, message, then the kind's extra fields.
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.int(self.code());
        w.string(&self.message);
        match &self.kind {
            ErrorKind::Unavailable {
                consistency,
                required,
                alive,
            } => {
                w.short(*consistency);
                w.int(*required);
                w.int(*alive);
            }
            ErrorKind::WriteTimeout {
                consistency,
                received,
                block_for,
                write_type,
            } => {
                w.short(*consistency);
                w.int(*received);
                w.int(*block_for);
                w.string(write_type);
            }
            ErrorKind::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            } => {
                w.short(*consistency);
                w.int(*received);
                w.int(*block_for);
                w.byte(u8::from(*data_present));
            }
            ErrorKind::ReadFailure {
                consistency,
                received,
                block_for,
                num_failures,
                data_present,
            } => {
                w.short(*consistency);
                w.int(*received);
                w.int(*block_for);
                w.int(*num_failures);
                w.byte(u8::from(*data_present));
            }
            ErrorKind::AlreadyExists { keyspace, table } => {
                w.string(keyspace);
                w.string(table);
            }
            ErrorKind::Unprepared { id } => w.short_bytes(id),
            ErrorKind::Server
            | ErrorKind::Protocol
            | ErrorKind::Overloaded
            | ErrorKind::Syntax
            | ErrorKind::Unauthorized
            | ErrorKind::Invalid => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;

    #[test]
    fn write_timeout_body_is_code_message_then_fields() {
        let e = CqlError::new(
            ErrorKind::WriteTimeout {
                consistency: 4,
                received: 0,
                block_for: 1,
                write_type: "SIMPLE",
            },
            "timed out",
        );
        let mut w = Writer::new();
        e.encode(&mut w);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.int().unwrap(), 0x1100);
        assert_eq!(r.string().unwrap(), "timed out");
        assert_eq!(r.short().unwrap(), 4);
        assert_eq!(r.int().unwrap(), 0);
        assert_eq!(r.int().unwrap(), 1);
        assert_eq!(r.string().unwrap(), "SIMPLE");
        assert_eq!(r.remaining(), 0);
    }

    /// The v4 body Cassandra 4.1.1 sends for a read aborted on tombstones.
    #[test]
    fn read_failure_body_is_the_v4_layout() {
        let e = CqlError::new(
            ErrorKind::ReadFailure {
                consistency: 4,
                received: 0,
                block_for: 1,
                num_failures: 1,
                data_present: false,
            },
            "Operation failed - received 0 responses and 1 failures: READ_TOO_MANY_TOMBSTONES from /127.0.0.1:7000",
        );
        let mut w = Writer::new();
        e.encode(&mut w);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.int().unwrap(), 0x1300);
        assert!(r.string().unwrap().contains("READ_TOO_MANY_TOMBSTONES"));
        assert_eq!(r.short().unwrap(), 4);
        assert_eq!(r.int().unwrap(), 0);
        assert_eq!(r.int().unwrap(), 1);
        assert_eq!(r.int().unwrap(), 1);
        assert_eq!(r.byte().unwrap(), 0);
        assert_eq!(r.remaining(), 0);
    }
}

//! A minimal raw CQL v4 client for protocol tests: frames in, frames out.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const STARTUP: u8 = 0x01;
pub const OPTIONS: u8 = 0x05;
pub const QUERY: u8 = 0x07;
pub const EXECUTE: u8 = 0x0A;
pub const ERROR: u8 = 0x00;
pub const READY: u8 = 0x02;
pub const RESULT: u8 = 0x08;
pub const SUPPORTED: u8 = 0x06;

/// A received frame.
#[derive(Debug)]
pub struct Frame {
    pub version: u8,
    pub stream: i16,
    pub opcode: u8,
    pub body: Vec<u8>,
}

impl Frame {
    /// `(code, message)` of an ERROR frame.
    pub fn error(&self) -> (i32, String) {
        assert_eq!(self.opcode, ERROR, "not an error: {self:?}");
        let code = i32::from_be_bytes(self.body[0..4].try_into().unwrap());
        let len = u16::from_be_bytes([self.body[4], self.body[5]]) as usize;
        (
            code,
            String::from_utf8_lossy(&self.body[6..6 + len]).into_owned(),
        )
    }
}

pub struct Raw {
    pub stream: TcpStream,
}

pub fn frame(version: u8, flags: u8, stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![version, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(opcode);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

pub fn startup_body() -> Vec<u8> {
    let mut b = vec![0, 1];
    for s in ["CQL_VERSION", "3.0.0"] {
        b.extend_from_slice(&(s.len() as u16).to_be_bytes());
        b.extend_from_slice(s.as_bytes());
    }
    b
}

/// A QUERY body at consistency ONE, no values.
pub fn query_body(cql: &str) -> Vec<u8> {
    let mut b = (cql.len() as i32).to_be_bytes().to_vec();
    b.extend_from_slice(cql.as_bytes());
    b.extend_from_slice(&[0, 1, 0]);
    b
}

impl Raw {
    pub async fn connect(addr: std::net::SocketAddr) -> Raw {
        Raw {
            stream: TcpStream::connect(addr).await.unwrap(),
        }
    }

    /// Connects and sends STARTUP.
    pub async fn started(addr: std::net::SocketAddr) -> Raw {
        let mut r = Raw::connect(addr).await;
        r.send(4, 0, STARTUP, &startup_body()).await;
        assert_eq!(r.recv().await.unwrap().opcode, READY);
        r
    }

    pub async fn send_bytes(&mut self, b: &[u8]) {
        self.stream.write_all(b).await.unwrap();
    }

    pub async fn send(&mut self, stream: i16, flags: u8, opcode: u8, body: &[u8]) {
        self.send_bytes(&frame(4, flags, stream, opcode, body))
            .await;
    }

    /// The next frame, or None when the server closed the connection.
    pub async fn recv(&mut self) -> Option<Frame> {
        let mut h = [0u8; 9];
        let read = tokio::time::timeout(Duration::from_secs(10), self.stream.read_exact(&mut h))
            .await
            .expect("no answer within 10 s");
        read.ok()?;
        let len = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) as usize;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Frame {
            version: h[0],
            stream: i16::from_be_bytes([h[2], h[3]]),
            opcode: h[4],
            body,
        })
    }

    /// Whether the server closed the connection (EOF within 5 s).
    pub async fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

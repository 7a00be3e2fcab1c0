//! The v4 envelope: a 9-byte header (version, flags, stream id, opcode, body
//! length) in front of every request and response.
//!
//! # Version handling
//!
//! Only protocol v4 is served. A client probing another version (the Python
//! driver tries 0x42, 0x41, 5, then 4) gets `ERROR 0x000A` "Invalid or
//! unsupported protocol version (N); supported versions are (4/v4)" in a v4
//! frame carrying the request's stream id, read straight from header bytes
//! 2..4 because the rest of an unknown version's header cannot be trusted.
//! The connection is then closed, as Cassandra does. Versions 1 and 2 have
//! an 8-byte header with a one-byte stream id: they are recognised from the
//! first 8 bytes and answered in their own layout, so an old client gets the
//! refusal instead of a server waiting for a ninth byte.
//!
//! # Frame size
//!
//! A body longer than the endpoint's maximum (Cassandra's 256 MiB by default)
//! is refused with a protocol error before a byte of it is buffered: without
//! the cap a client could make the server allocate up to 4 GiB per frame.

use crate::error::CqlError;
use crate::wire::Reader;

/// Length of a v3+ frame header.
pub(crate) const HEADER_LEN: usize = 9;
/// The only protocol version served.
pub(crate) const VERSION: u8 = 0x04;
/// The largest request body accepted by default: Cassandra's
/// `native_transport_max_frame_size` of 256 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// Request and response opcodes (spec §2.4).
pub(crate) mod opcode {
    pub(crate) const ERROR: u8 = 0x00;
    pub(crate) const STARTUP: u8 = 0x01;
    pub(crate) const READY: u8 = 0x02;
    pub(crate) const OPTIONS: u8 = 0x05;
    pub(crate) const SUPPORTED: u8 = 0x06;
    pub(crate) const QUERY: u8 = 0x07;
    pub(crate) const RESULT: u8 = 0x08;
    pub(crate) const PREPARE: u8 = 0x09;
    pub(crate) const EXECUTE: u8 = 0x0A;
    pub(crate) const REGISTER: u8 = 0x0B;
    pub(crate) const BATCH: u8 = 0x0D;
    pub(crate) const AUTH_RESPONSE: u8 = 0x0F;
}

/// Header flags (spec §2.2).
mod flag {
    pub(crate) const COMPRESSION: u8 = 0x01;
    pub(crate) const CUSTOM_PAYLOAD: u8 = 0x04;
    pub(crate) const WARNING: u8 = 0x08;
}

/// A request header that passed the version, direction and size checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) flags: u8,
    pub(crate) stream: i16,
    pub(crate) opcode: u8,
    pub(crate) length: usize,
}

/// What a received header says to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderCheck {
    /// A v4 request: read `length` bytes of body.
    Request(Header),
    /// Another protocol version: answer with [`unsupported_version`] and close.
    WrongVersion { version: u8, stream: i16 },
    /// A v4 frame the connection cannot continue after (too large, or a
    /// response sent to the server): answer with the error and close.
    Fatal {
        stream: i16,
        error_message: &'static str,
    },
}

/// Length of a v1 / v2 frame header (one-byte stream id).
pub(crate) const OLD_HEADER_LEN: usize = 8;

/// `(version, stream)` if the first bytes are a v1 or v2 header.
pub(crate) fn old_version(h: &[u8; HEADER_LEN]) -> Option<(u8, i8)> {
    let version = h[0] & 0x7f;
    (version <= 2).then(|| (version, h[2] as i8))
}

/// A response in the v1 / v2 layout, so an old client can read the refusal.
pub(crate) fn old_response(version: u8, stream: i8, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | version, 0, stream as u8, opcode];
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The stream id of any v3+ header, whatever its version.
fn stream_of(h: &[u8; HEADER_LEN]) -> i16 {
    i16::from_be_bytes([h[2], h[3]])
}

/// Classifies a request header.
pub(crate) fn check_header(h: &[u8; HEADER_LEN], max_frame_bytes: usize) -> HeaderCheck {
    let version = h[0] & 0x7f;
    let stream = stream_of(h);
    if version != VERSION {
        return HeaderCheck::WrongVersion { version, stream };
    }
    if h[0] & 0x80 != 0 {
        return HeaderCheck::Fatal {
            stream,
            error_message: "a response frame was sent to the server",
        };
    }
    let length = u32::from_be_bytes([h[5], h[6], h[7], h[8]]);
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    if length > max_frame_bytes {
        return HeaderCheck::Fatal {
            stream,
            error_message: "request frame exceeds the maximum frame size",
        };
    }
    HeaderCheck::Request(Header {
        flags: h[1],
        stream,
        opcode: h[4],
        length,
    })
}

/// The message sent for a frame of another protocol version. Python's driver
/// looks for "unsupported protocol version" to step down to the next version.
pub(crate) fn unsupported_version(version: u8) -> CqlError {
    CqlError::protocol(format!(
        "Invalid or unsupported protocol version ({version}); supported versions are (4/v4)"
    ))
}

/// The body of a request after its header flags were honoured: the custom
/// payload (if flagged) skipped; compressed bodies refused, since no
/// compression is offered in SUPPORTED.
pub(crate) fn request_body<'a>(header: &Header, body: &'a [u8]) -> Result<&'a [u8], CqlError> {
    if header.flags & flag::COMPRESSION != 0 {
        return Err(CqlError::protocol(
            "compressed frame received, but no compression was negotiated",
        ));
    }
    if header.flags & flag::CUSTOM_PAYLOAD != 0 {
        let mut r = Reader::new(body);
        r.skip_bytes_map()?;
        let consumed = body.len() - r.remaining();
        return Ok(&body[consumed..]);
    }
    Ok(body)
}

/// A complete response frame: header then body.
pub(crate) fn response(stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
    framed(stream, 0, opcode, body)
}

/// The frame of a [`Response`](crate::messages::Response): with warnings,
/// the warning flag set and the body led by them as a `[string list]`, as
/// Cassandra sends a tombstone warning.
pub(crate) fn response_of(stream: i16, r: &crate::messages::Response) -> Vec<u8> {
    if r.warnings.is_empty() {
        return response(stream, r.opcode, &r.body);
    }
    let mut w = crate::wire::Writer::new();
    let list: Vec<&str> = r.warnings.iter().map(String::as_str).collect();
    w.string_list(&list);
    w.buf.extend_from_slice(&r.body);
    framed(stream, flag::WARNING, r.opcode, &w.buf)
}

fn framed(stream: i16, flags: u8, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.push(0x80 | VERSION);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(opcode);
    // Bodies are built from capped requests and pages; a u32 overflow would
    // need a 4 GiB result page, so saturate rather than panic.
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u8, stream: i16, opcode: u8, len: u32) -> [u8; HEADER_LEN] {
        let s = stream.to_be_bytes();
        let l = len.to_be_bytes();
        [version, 0, s[0], s[1], opcode, l[0], l[1], l[2], l[3]]
    }

    #[test]
    fn v4_request_passes_with_its_stream() {
        let h = header(4, 300, opcode::QUERY, 10);
        assert_eq!(
            check_header(&h, 100),
            HeaderCheck::Request(Header {
                flags: 0,
                stream: 300,
                opcode: opcode::QUERY,
                length: 10
            })
        );
    }

    #[test]
    fn other_versions_keep_their_stream_id() {
        for v in [0x42, 0x41, 5, 3] {
            assert_eq!(
                check_header(&header(v, 7, opcode::OPTIONS, 0), 100),
                HeaderCheck::WrongVersion {
                    version: v & 0x7f,
                    stream: 7
                }
            );
        }
        assert!(
            unsupported_version(5)
                .message
                .contains("unsupported protocol version")
        );
    }

    #[test]
    fn v1_and_v2_headers_are_recognised_by_their_first_byte() {
        let mut h = [0u8; HEADER_LEN];
        h[0] = 2;
        h[2] = 0xfe;
        assert_eq!(old_version(&h), Some((2, -2)));
        h[0] = 4;
        assert_eq!(old_version(&h), None);
        let r = old_response(2, -2, opcode::ERROR, b"xy");
        assert_eq!(r, [0x82, 0, 0xfe, 0, 0, 0, 0, 2, b'x', b'y']);
    }

    #[test]
    fn oversize_and_response_frames_are_fatal() {
        assert!(matches!(
            check_header(&header(4, 1, opcode::QUERY, 101), 100),
            HeaderCheck::Fatal { stream: 1, .. }
        ));
        assert!(matches!(
            check_header(&header(0x84, 1, opcode::QUERY, 0), 100),
            HeaderCheck::Fatal { .. }
        ));
    }

    #[test]
    fn custom_payload_is_skipped() {
        let mut body = vec![0, 1, 0, 1, b'k', 0, 0, 0, 1, 9];
        body.extend_from_slice(b"rest");
        let h = Header {
            flags: 0x04,
            stream: 0,
            opcode: opcode::QUERY,
            length: body.len(),
        };
        assert_eq!(request_body(&h, &body).unwrap(), b"rest");
        let h = Header { flags: 0x01, ..h };
        assert!(request_body(&h, &body).is_err());
    }
}

//! Minimal local signalling over HTTP/1.1 (one request per connection, `Connection: close`):
//! `POST /offer` carries the client's SDP offer and call parameters and returns the answer;
//! `POST /report` ends the call and returns the server's half of the report. Bodies are JSON.
//! Only what these two exchanges need is parsed: a request line or status line, the
//! `Content-Length` header, and a body of bounded size.
//!
//! ```
//! use sidekick_examples::webrtc::signal::{encode_request, parse_request};
//! let req = encode_request("POST", "/offer", "10.0.1.1:5000", b"{}");
//! let (r, used) = parse_request(&req, 1024).unwrap().unwrap();
//! assert_eq!((r.method.as_str(), r.path.as_str(), &r.body[..]), ("POST", "/offer", &b"{}"[..]));
//! assert_eq!(used, req.len());
//! assert!(parse_request(&req[..10], 1024).unwrap().is_none()); // incomplete
//! ```

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request or response head.
pub const MAX_HEAD: usize = 8 * 1024;

/// Largest body (an SDP offer is a few kB).
pub const MAX_BODY: usize = 256 * 1024;

/// Why an HTTP message was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignalError {
    /// The head is not HTTP/1.x as expected.
    #[error("malformed HTTP message: {0}")]
    Malformed(&'static str),
    /// Head or body over the limit.
    #[error("HTTP message too large")]
    TooLarge,
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method (`POST`, `GET`).
    pub method: String,
    /// Path.
    pub path: String,
    /// Body.
    pub body: Vec<u8>,
}

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body.
    pub body: Vec<u8>,
}

/// Splits `buf` into (first line, content length, head length) once the head is complete.
fn parse_head(buf: &[u8], max_body: usize) -> Result<Option<(&str, usize, usize)>, SignalError> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD {
            Err(SignalError::TooLarge)
        } else {
            Ok(None)
        };
    };
    if end > MAX_HEAD {
        return Err(SignalError::TooLarge);
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| SignalError::Malformed("utf-8"))?;
    let mut lines = head.split("\r\n");
    let first = lines.next().ok_or(SignalError::Malformed("empty"))?;
    let mut length = 0usize;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or(SignalError::Malformed("header"))?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = value
                .trim()
                .parse()
                .map_err(|_| SignalError::Malformed("content-length"))?;
        }
    }
    if length > max_body {
        return Err(SignalError::TooLarge);
    }
    Ok(Some((first, length, end + 4)))
}

/// Parses a request from the start of `buf`: `Ok(None)` while incomplete, else the request and
/// the bytes it used. Network input: never panics.
pub fn parse_request(buf: &[u8], max_body: usize) -> Result<Option<(Request, usize)>, SignalError> {
    let Some((first, length, head)) = parse_head(buf, max_body)? else {
        return Ok(None);
    };
    let mut parts = first.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SignalError::Malformed("request line"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !path.starts_with('/') {
        return Err(SignalError::Malformed("request line"));
    }
    let Some(body) = buf.get(head..head + length) else {
        return Ok(None);
    };
    Ok(Some((
        Request {
            method: method.to_string(),
            path: path.to_string(),
            body: body.to_vec(),
        },
        head + length,
    )))
}

/// Parses a response from the start of `buf` (`Ok(None)` while incomplete). Never panics.
pub fn parse_response(
    buf: &[u8],
    max_body: usize,
) -> Result<Option<(Response, usize)>, SignalError> {
    let Some((first, length, head)) = parse_head(buf, max_body)? else {
        return Ok(None);
    };
    let mut parts = first.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(SignalError::Malformed("status line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(SignalError::Malformed("status line"));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| SignalError::Malformed("status code"))?;
    let Some(body) = buf.get(head..head + length) else {
        return Ok(None);
    };
    Ok(Some((
        Response {
            status,
            body: body.to_vec(),
        },
        head + length,
    )))
}

/// Encodes a request with a JSON body.
pub fn encode_request(method: &str, path: &str, host: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

/// Encodes a response with a JSON body.
pub fn encode_response(status: u16, body: &[u8]) -> Vec<u8> {
    encode_response_typed(status, "application/json", body)
}

/// Encodes a response with a body of `content_type`.
pub fn encode_response_typed(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Error",
    };
    let mut v = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n\
         Access-Control-Allow-Origin: *\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

async fn read_message<T>(
    s: &mut TcpStream,
    parse: impl Fn(&[u8]) -> Result<Option<(T, usize)>, SignalError>,
) -> anyhow::Result<T> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((m, _)) = parse(&buf)? {
            return Ok(m);
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            anyhow::bail!("connection closed before the message was complete");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Sends one request to `addr` and returns the response (bounded by `timeout`).
pub async fn post(
    addr: std::net::SocketAddr,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> anyhow::Result<Response> {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(&encode_request("POST", path, &addr.to_string(), body))
            .await?;
        read_message(&mut s, |b| parse_response(b, MAX_BODY)).await
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("signalling request {path} timed out"))?
}

/// Accepts one connection on `listener` and reads one request (bounded by `timeout`); returns
/// the stream for the answer and the server address the client reached.
pub async fn accept_request(
    listener: &TcpListener,
    timeout: Duration,
) -> anyhow::Result<(TcpStream, Request)> {
    let (mut s, _) = listener.accept().await?;
    let req = tokio::time::timeout(
        timeout,
        read_message(&mut s, |b| parse_request(b, MAX_BODY)),
    )
    .await
    .map_err(|_| anyhow::anyhow!("signalling request timed out"))??;
    Ok((s, req))
}

/// Writes a JSON response and closes the stream.
pub async fn respond(s: TcpStream, status: u16, body: &[u8]) -> anyhow::Result<()> {
    respond_typed(s, status, "application/json", body).await
}

/// Writes a response with a body of `content_type` and closes the stream.
pub async fn respond_typed(
    mut s: TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> anyhow::Result<()> {
    s.write_all(&encode_response_typed(status, content_type, body))
        .await?;
    s.shutdown().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn response_round_trip_and_limits() {
        let r = encode_response(200, b"{\"a\":1}");
        let (p, n) = parse_response(&r, 100).unwrap().unwrap();
        assert_eq!(
            (p.status, &p.body[..], n),
            (200, &b"{\"a\":1}"[..], r.len())
        );
        assert_eq!(parse_response(&r, 3), Err(SignalError::TooLarge));
        assert!(parse_response(&r[..r.len() - 1], 100).unwrap().is_none());
        assert_eq!(
            parse_request(b"GET nopath HTTP/1.1\r\n\r\n", 10),
            Err(SignalError::Malformed("request line"))
        );
        assert_eq!(
            parse_request(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 10),
            Err(SignalError::Malformed("content-length"))
        );
        assert_eq!(
            parse_request(&vec![b'a'; MAX_HEAD + 1], 10),
            Err(SignalError::TooLarge)
        );
    }

    #[tokio::test]
    async fn post_and_answer_over_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (s, req) = accept_request(&l, Duration::from_secs(5)).await.unwrap();
            assert_eq!(req.path, "/offer");
            respond(s, 200, &req.body).await.unwrap();
        });
        let r = post(addr, "/offer", b"hello", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
        server.await.unwrap();
    }

    proptest! {
        #[test]
        fn request_round_trips(path in "/[a-z]{0,12}", body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let r = encode_request("POST", &path, "h:1", &body);
            let (p, n) = parse_request(&r, 1000).unwrap().unwrap();
            prop_assert_eq!(p.path, path);
            prop_assert_eq!(p.body, body);
            prop_assert_eq!(n, r.len());
            for cut in 0..r.len() {
                prop_assert!(parse_request(&r[..cut], 1000).unwrap().is_none());
            }
        }

        #[test]
        fn parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_request(&data, 100);
            let _ = parse_response(&data, 100);
        }
    }
}

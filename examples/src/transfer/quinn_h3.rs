//! HTTP/3 variant of the quinn transfer (`--http3`, h3 + h3-quinn): the same requests as the
//! quiche variant (`GET /download/N`, `POST /upload/N` answered with the [`Summary`],
//! `GET /stats`), so quinn and quiche interoperate over HTTP/3 too.

use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use bytes::{Buf as _, Bytes};

use super::{
    CHUNK, Request, SenderStats, Summary, TransferDirection, fill_pattern, unix_ns, upload_duration,
};

fn pattern() -> Bytes {
    let mut v = vec![0u8; CHUNK];
    fill_pattern(&mut v);
    Bytes::from(v)
}

fn stats_summary(conn: &quinn::Connection) -> Summary {
    let s = conn.stats();
    Summary {
        sent_packets: s.path.sent_packets,
        lost_packets: s.path.lost_packets,
        retransmissions: s.path.lost_packets,
        ..Summary::default()
    }
}

/// Serve HTTP/3 requests on `conn` until the client closes it.
pub(super) async fn serve_connection(conn: quinn::Connection) -> anyhow::Result<()> {
    let mut h3c: h3::server::Connection<h3_quinn::Connection, Bytes> =
        h3::server::Connection::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .context("h3 server")?;
    loop {
        match h3c.accept().await {
            Ok(Some(resolver)) => {
                let (req, stream) = resolver.resolve_request().await.context("request")?;
                let conn = conn.clone();
                tokio::spawn(async move {
                    if let Err(e) = handle(req, stream, conn).await {
                        tracing::warn!("request failed: {e:#}");
                    }
                });
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::debug!("h3 connection ended: {e}");
                return Ok(());
            }
        }
    }
}

async fn respond<S: h3::quic::BidiStream<Bytes>>(
    stream: &mut h3::server::RequestStream<S, Bytes>,
    status: u16,
    body: Option<Bytes>,
) -> anyhow::Result<()> {
    let resp = http::Response::builder().status(status).body(())?;
    stream.send_response(resp).await.context("send_response")?;
    if let Some(b) = body {
        stream.send_data(b).await.context("send_data")?;
    }
    stream.finish().await.context("finish")?;
    Ok(())
}

async fn handle<S: h3::quic::BidiStream<Bytes>>(
    req: http::Request<()>,
    mut stream: h3::server::RequestStream<S, Bytes>,
    conn: quinn::Connection,
) -> anyhow::Result<()> {
    let path = req.uri().path().to_owned();
    let num = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|n| n.parse::<u64>().ok())
    };
    tracing::info!(method = %req.method(), %path, "request");
    match (req.method().as_str(), num("/download/"), num("/upload/")) {
        ("GET", Some(n), _) => {
            let resp = http::Response::builder()
                .status(200)
                .header("content-length", n)
                .body(())?;
            stream.send_response(resp).await.context("send_response")?;
            let chunk = pattern();
            let mut left = n;
            while left > 0 {
                let k = usize::try_from(left).unwrap_or(usize::MAX).min(CHUNK);
                stream
                    .send_data(chunk.slice(..k))
                    .await
                    .context("send_data")?;
                left -= k as u64;
            }
            stream.finish().await.context("finish")?;
        }
        ("POST", _, Some(n)) => {
            let (mut got, mut first, mut last) = (0u64, 0u64, 0u64);
            while let Some(mut b) = stream.recv_data().await.context("recv_data")? {
                if got == 0 {
                    first = unix_ns(SystemTime::now());
                }
                got += b.remaining() as u64;
                b.advance(b.remaining());
                if got >= n && last == 0 {
                    last = unix_ns(SystemTime::now());
                }
            }
            let s = Summary {
                bytes: got,
                first_byte_unix_ns: first,
                last_byte_unix_ns: last,
                ..stats_summary(&conn)
            };
            respond(&mut stream, 200, Some(Bytes::copy_from_slice(&s.encode()))).await?;
        }
        ("GET", _, _) if path == "/stats" => {
            let s = stats_summary(&conn);
            respond(&mut stream, 200, Some(Bytes::copy_from_slice(&s.encode()))).await?;
        }
        _ => respond(&mut stream, 404, None).await?,
    }
    Ok(())
}

/// Ends a request without a body. A server that has already answered may have dropped the
/// request stream, and quinn stops the receiving side of a stream dropped unread
/// (STOP_SENDING 0), which fails the `finish` that raced it without harm: the request was
/// whole, and its response is read next.
async fn finish_bodyless<S: h3::quic::SendStream<Bytes>>(
    stream: &mut h3::client::RequestStream<S, Bytes>,
) {
    if let Err(e) = stream.finish().await {
        tracing::debug!(error = %e, "a request without body: finish refused by the server");
    }
}

async fn read_body<S: h3::quic::RecvStream>(
    stream: &mut h3::client::RequestStream<S, Bytes>,
) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(mut b) = stream.recv_data().await.context("recv_data")? {
        // Bodies read whole are summaries (52 bytes); cap defensively.
        if out.len() < 4096 {
            let take = b.remaining().min(4096 - out.len());
            out.extend_from_slice(&b.chunk()[..take.min(b.chunk().len())]);
        }
        b.advance(b.remaining());
    }
    Ok(out)
}

/// One HTTP/3 transfer on an established quinn connection; returns the goodput interval and the
/// data sender's statistics.
pub(super) async fn client(
    conn: &quinn::Connection,
    req: Request,
) -> anyhow::Result<(Duration, SenderStats)> {
    let (mut driver, mut send_request) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .context("h3 client")?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let start = Instant::now();
    let start_wall = unix_ns(SystemTime::now());
    let result = match req.direction {
        TransferDirection::Download => {
            let r =
                http::Request::get(format!("https://localhost/download/{}", req.bytes)).body(())?;
            let mut stream = send_request.send_request(r).await.context("send_request")?;
            finish_bodyless(&mut stream).await;
            let resp = stream.recv_response().await.context("response")?;
            if resp.status() != 200 {
                bail!("server answered {}", resp.status());
            }
            let mut got = 0u64;
            while let Some(mut b) = stream.recv_data().await.context("recv_data")? {
                got += b.remaining() as u64;
                b.advance(b.remaining());
            }
            let duration = start.elapsed();
            if got != req.bytes {
                bail!("download ended after {got} of {} bytes", req.bytes);
            }
            let r = http::Request::get("https://localhost/stats").body(())?;
            let mut s = send_request
                .send_request(r)
                .await
                .context("stats request")?;
            finish_bodyless(&mut s).await;
            let resp = s.recv_response().await.context("stats response")?;
            // A server of another stack (ngtcp2's) has no /stats: its counters stay unknown.
            let summary = (resp.status() == 200)
                .then_some(Summary::decode(&read_body(&mut s).await?).ok())
                .flatten();
            if summary.is_none() {
                tracing::info!(status = %resp.status(), "no /stats summary: sender counters unknown");
            }
            let known = summary.unwrap_or_default();
            (
                duration,
                SenderStats {
                    sent_packets: known.sent_packets,
                    lost_packets: known.lost_packets,
                    retransmissions: known.retransmissions,
                    receiver_sent_packets: conn.stats().path.sent_packets,
                    sender_unknown: summary.is_none(),
                },
            )
        }
        TransferDirection::Upload => {
            let r =
                http::Request::post(format!("https://localhost/upload/{}", req.bytes)).body(())?;
            let mut stream = send_request.send_request(r).await.context("send_request")?;
            let chunk = pattern();
            let mut left = req.bytes;
            while left > 0 {
                let k = usize::try_from(left).unwrap_or(usize::MAX).min(CHUNK);
                stream
                    .send_data(chunk.slice(..k))
                    .await
                    .context("send_data")?;
                left -= k as u64;
            }
            stream.finish().await.context("finish")?;
            let resp = stream.recv_response().await.context("response")?;
            if resp.status() != 200 {
                bail!("server answered {}", resp.status());
            }
            let summary = Summary::decode(&read_body(&mut stream).await?)?;
            let elapsed = start.elapsed();
            if summary.bytes != req.bytes {
                bail!("server received {} of {} bytes", summary.bytes, req.bytes);
            }
            let s = conn.stats();
            (
                upload_duration(start_wall, &summary, elapsed),
                SenderStats {
                    sent_packets: s.path.sent_packets,
                    lost_packets: s.path.lost_packets,
                    retransmissions: s.path.lost_packets,
                    receiver_sent_packets: summary.sent_packets,
                    sender_unknown: false,
                },
            )
        }
    };
    drop(send_request);
    drive.abort();
    Ok(result)
}

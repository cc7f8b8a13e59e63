//! HTTP/3 variant of the quiche transfer (`--http3`): `GET /download/N` returns N bytes,
//! `POST /upload/N` with an N-byte body returns the [`Summary`] as its body, `GET /stats` returns
//! the server connection's [`Summary`] (sent/lost/retransmitted packets) — the client asks for it
//! after a download, outside the timed interval.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use quiche::h3::NameValue as _;

use super::quiche_stack::{Driver, Io, direction_result, stats_of};
use super::{
    CHUNK, Request, SenderStats, Stack, Summary, TransferDirection, TransferReport, fill_pattern,
    unix_ns,
};

/// Response body still to write on one stream: `pattern` bytes of payload, then `tail`, then FIN.
struct Body {
    pattern: u64,
    tail: Vec<u8>,
    fin_sent: bool,
}

impl Body {
    fn pump(
        &mut self,
        h3: &mut quiche::h3::Connection,
        conn: &mut quiche::Connection,
        sid: u64,
        pattern: &[u8],
    ) -> anyhow::Result<()> {
        while self.pattern > 0 {
            let n = usize::try_from(self.pattern)
                .unwrap_or(usize::MAX)
                .min(CHUNK);
            match h3.send_body(conn, sid, &pattern[..n], false) {
                Ok(w) => {
                    self.pattern -= w as u64;
                    if w < n {
                        return Ok(());
                    }
                }
                Err(quiche::h3::Error::Done | quiche::h3::Error::StreamBlocked) => return Ok(()),
                Err(e) => bail!("send_body: {e}"),
            }
        }
        while !self.tail.is_empty() {
            match h3.send_body(conn, sid, &self.tail, false) {
                Ok(w) => {
                    self.tail.drain(..w);
                    if !self.tail.is_empty() {
                        return Ok(());
                    }
                }
                Err(quiche::h3::Error::Done | quiche::h3::Error::StreamBlocked) => return Ok(()),
                Err(e) => bail!("send_body: {e}"),
            }
        }
        if !self.fin_sent {
            match h3.send_body(conn, sid, &[], true) {
                Ok(_) => self.fin_sent = true,
                Err(quiche::h3::Error::Done | quiche::h3::Error::StreamBlocked) => {}
                Err(e) => bail!("send_body fin: {e}"),
            }
        }
        Ok(())
    }
}

fn header(list: &[quiche::h3::Header], name: &[u8]) -> Option<String> {
    list.iter()
        .find(|h| h.name() == name)
        .map(|h| String::from_utf8_lossy(h.value()).into_owned())
}

fn response(status: &str, len: Option<usize>) -> Vec<quiche::h3::Header> {
    let mut h = vec![quiche::h3::Header::new(b":status", status.as_bytes())];
    if let Some(l) = len {
        h.push(quiche::h3::Header::new(
            b"content-length",
            l.to_string().as_bytes(),
        ));
    }
    h
}

struct Upload {
    expected: u64,
    got: u64,
    first: u64,
    last: u64,
}

/// The HTTP/3 settings both sides use: quiche's defaults.
///
/// Since quiche 0.30 the default limit on a received header section is 32 KiB (quiche 0.24 set
/// none) and it is advertised in SETTINGS; quiche cannot go back to "no limit", and our header
/// sections are a few hundred bytes, so the limit changes nothing but one SETTINGS entry.
fn h3_config() -> anyhow::Result<quiche::h3::Config> {
    quiche::h3::Config::new().context("h3 config")
}

/// Serve HTTP/3 requests on one established-or-handshaking connection until it closes.
pub(super) fn serve_connection(
    io: &mut Io,
    conn: &mut quiche::Connection,
    peer: SocketAddr,
) -> anyhow::Result<()> {
    let h3_cfg = h3_config()?;
    let mut h3: Option<quiche::h3::Connection> = None;
    let mut pattern = vec![0u8; CHUNK];
    fill_pattern(&mut pattern);
    let mut bodies: HashMap<u64, Body> = HashMap::new();
    let mut uploads: HashMap<u64, Upload> = HashMap::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        io.flush(conn)?;
        if conn.is_closed() {
            io.drain()?;
            break;
        }
        io.step(conn, peer)?;
        if h3.is_none() && (conn.is_established() || conn.is_in_early_data()) {
            h3 = Some(quiche::h3::Connection::with_transport(conn, &h3_cfg).context("h3")?);
        }
        let Some(h3c) = h3.as_mut() else { continue };
        loop {
            match h3c.poll(conn) {
                Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                    let method = header(&list, b":method").unwrap_or_default();
                    let path = header(&list, b":path").unwrap_or_default();
                    tracing::info!(%peer, %method, %path, "request");
                    let num = |prefix: &str| {
                        path.strip_prefix(prefix)
                            .and_then(|n| n.parse::<u64>().ok())
                    };
                    match (method.as_str(), num("/download/"), num("/upload/")) {
                        ("GET", Some(n), _) => {
                            let len = usize::try_from(n).ok();
                            h3c.send_response(conn, sid, &response("200", len), false)
                                .context("send_response")?;
                            bodies.insert(
                                sid,
                                Body {
                                    pattern: n,
                                    tail: Vec::new(),
                                    fin_sent: false,
                                },
                            );
                        }
                        ("POST", _, Some(n)) => {
                            uploads.insert(
                                sid,
                                Upload {
                                    expected: n,
                                    got: 0,
                                    first: 0,
                                    last: 0,
                                },
                            );
                        }
                        ("GET", _, _) if path == "/stats" => {
                            let st = stats_of(conn);
                            let s = Summary {
                                sent_packets: st.sent_packets,
                                lost_packets: st.lost_packets,
                                retransmissions: st.retransmissions,
                                ..Summary::default()
                            };
                            h3c.send_response(
                                conn,
                                sid,
                                &response("200", Some(Summary::LEN)),
                                false,
                            )
                            .context("send_response")?;
                            bodies.insert(
                                sid,
                                Body {
                                    pattern: 0,
                                    tail: s.encode().to_vec(),
                                    fin_sent: false,
                                },
                            );
                        }
                        _ => {
                            h3c.send_response(conn, sid, &response("404", Some(0)), true)
                                .context("send_response")?;
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    while let Ok(n) = h3c.recv_body(conn, sid, &mut buf) {
                        if let Some(u) = uploads.get_mut(&sid) {
                            if u.got == 0 {
                                u.first = unix_ns(SystemTime::now());
                            }
                            u.got += n as u64;
                            if u.got >= u.expected && u.last == 0 {
                                u.last = unix_ns(SystemTime::now());
                            }
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Finished)) => {
                    if let Some(u) = uploads.remove(&sid) {
                        let st = stats_of(conn);
                        let s = Summary {
                            bytes: u.got,
                            first_byte_unix_ns: u.first,
                            last_byte_unix_ns: u.last,
                            sent_packets: st.sent_packets,
                            lost_packets: st.lost_packets,
                            retransmissions: st.retransmissions,
                        };
                        h3c.send_response(conn, sid, &response("200", Some(Summary::LEN)), false)
                            .context("send_response")?;
                        bodies.insert(
                            sid,
                            Body {
                                pattern: 0,
                                tail: s.encode().to_vec(),
                                fin_sent: false,
                            },
                        );
                    }
                }
                Ok(_) => {}
                Err(quiche::h3::Error::Done) => break,
                Err(e) => bail!("h3 poll: {e}"),
            }
        }
        for (sid, b) in &mut bodies {
            b.pump(h3c, conn, *sid, &pattern)?;
        }
        bodies.retain(|_, b| !b.fin_sent);
    }
    Ok(())
}

fn request(method: &str, path: &str) -> Vec<quiche::h3::Header> {
    vec![
        quiche::h3::Header::new(b":method", method.as_bytes()),
        quiche::h3::Header::new(b":scheme", b"https"),
        quiche::h3::Header::new(b":authority", b"localhost"),
        quiche::h3::Header::new(b":path", path.as_bytes()),
        quiche::h3::Header::new(b"user-agent", b"sidekick-transfer"),
    ]
}

/// One HTTP/3 transfer as a quiche client on a connection that is being established.
pub(super) fn client_loop(
    io: &mut Io,
    d: &mut dyn Driver,
    connect: SocketAddr,
    req: Request,
    deadline: Instant,
    timeout: Duration,
) -> anyhow::Result<TransferReport> {
    let h3_cfg = h3_config()?;
    let mut h3: Option<quiche::h3::Connection> = None;
    let mut pattern = vec![0u8; CHUNK];
    fill_pattern(&mut pattern);
    let mut start: Option<(Instant, u64)> = None;
    let mut main_sid: Option<u64> = None;
    let mut stats_sid: Option<u64> = None;
    let mut upload = Body {
        pattern: req.bytes,
        tail: Vec::new(),
        fin_sent: false,
    };
    let mut got = 0u64;
    let mut t_end: Option<Duration> = None;
    let mut summary_buf: Vec<u8> = Vec::with_capacity(Summary::LEN);
    let mut result: Option<(Duration, SenderStats)> = None;
    let mut buf = vec![0u8; CHUNK];
    loop {
        io.flush(d)?;
        if result.is_some() || d.conn().is_closed() {
            io.drain()?;
            break;
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} ({got} of {} bytes)", req.bytes);
        }
        io.step(d, connect)?;
        let conn = d.conn();
        if h3.is_none() && conn.is_established() {
            h3 = Some(quiche::h3::Connection::with_transport(conn, &h3_cfg).context("h3")?);
        }
        let Some(h3c) = h3.as_mut() else { continue };
        if main_sid.is_none() {
            start = Some((Instant::now(), unix_ns(SystemTime::now())));
            let sid = match req.direction {
                TransferDirection::Download => h3c.send_request(
                    conn,
                    &request("GET", &format!("/download/{}", req.bytes)),
                    true,
                ),
                TransferDirection::Upload => h3c.send_request(
                    conn,
                    &request("POST", &format!("/upload/{}", req.bytes)),
                    false,
                ),
            }
            .context("send_request")?;
            main_sid = Some(sid);
        }
        loop {
            match h3c.poll(conn) {
                Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                    let status = header(&list, b":status").unwrap_or_default();
                    if status != "200" && stats_sid == Some(sid) {
                        // A server of another stack (ngtcp2's) has no /stats: its counters
                        // stay unknown.
                        tracing::info!(%status, "no /stats summary: sender counters unknown");
                        result = Some((
                            t_end.context("stats before payload")?,
                            SenderStats {
                                receiver_sent_packets: conn.stats().sent as u64,
                                sender_unknown: true,
                                ..SenderStats::default()
                            },
                        ));
                        conn.close(true, 0x100, b"done").ok();
                    } else if status != "200" {
                        bail!("server answered {status}");
                    }
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    while let Ok(n) = h3c.recv_body(conn, sid, &mut buf) {
                        if Some(sid) == main_sid && req.direction == TransferDirection::Download {
                            got += n as u64;
                            if got >= req.bytes && t_end.is_none() {
                                t_end = start.map(|(s, _)| s.elapsed());
                            }
                        } else {
                            let room = Summary::LEN.saturating_sub(summary_buf.len()).min(n);
                            summary_buf.extend_from_slice(&buf[..room]);
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Finished)) => {
                    if Some(sid) == main_sid && req.direction == TransferDirection::Download {
                        if got != req.bytes {
                            bail!("download ended after {got} of {} bytes", req.bytes);
                        }
                        let s = h3c
                            .send_request(conn, &request("GET", "/stats"), true)
                            .context("stats request")?;
                        stats_sid = Some(s);
                    } else if summary_buf.len() == Summary::LEN {
                        let summary = Summary::decode(&summary_buf)?;
                        let (s, s_wall) = start.context("summary before request")?;
                        result = Some(direction_result(req, &summary, (s, s_wall), t_end, conn)?);
                        conn.close(true, 0x100, b"done").ok();
                    }
                }
                Ok(_) => {}
                Err(quiche::h3::Error::Done) => break,
                Err(e) => bail!("h3 poll: {e}"),
            }
        }
        if req.direction == TransferDirection::Upload
            && let Some(sid) = main_sid
        {
            upload.pump(h3c, conn, sid, &pattern)?;
        }
    }
    let _ = stats_sid;
    let Some((duration, stats)) = result else {
        bail!(
            "connection closed before the transfer completed ({got} of {} bytes; peer error {:?})",
            req.bytes,
            d.conn().peer_error()
        );
    };
    let mut report = TransferReport::new(Stack::Quiche, req.direction, req.bytes, duration, stats);
    if req.direction == TransferDirection::Upload {
        report.spurious_lost_packets = Some(d.conn().stats().spurious_lost as u64);
    }
    Ok(report)
}

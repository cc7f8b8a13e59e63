//! quinn server and client of the RTC application (tokio). Endpoint and TLS setup are the bulk
//! transfer's ([`crate::transfer::quinn_stack`]: GSO off so datagrams fit the MTU, self-signed
//! certificate, any certificate accepted by the client) with the ALPN [`ALPN`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::{Context as _, bail};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{Endpoint, VarInt};
use tokio::sync::mpsc;

use super::{
    ALPN, EndOfFrames, FrameHeader, FrameLog, FrameParams, FrameReader, MAX_BACKLOG_FRAMES,
    MAX_DURATION_MS, QUINN_CLIENT_MAX_CONCURRENT_UNI, RtcReport, RtcRequest, Stack, encode_frame,
};
use crate::transfer::quinn_stack::{
    client_tls, serve_with, server_endpoint_with, transport_config,
};
use crate::transfer::{TransportOptions, fill_pattern, udp_socket, unix_ns, unspecified_for};

/// A server endpoint on `listen` (fresh self-signed certificate, ALPN `sidekick-rtc`). Streams of
/// equal priority are sent in the order they are written (`send_fairness(false)`), without
/// round-robin interleaving.
pub fn server_endpoint(listen: SocketAddr) -> anyhow::Result<Endpoint> {
    let mut transport = transport_config(&TransportOptions::default())?;
    transport.send_fairness(false);
    server_endpoint_with(listen, ALPN.to_vec(), transport)
}

/// Serve RTC runs on `endpoint` with `params`, connections concurrently; with `once`, return
/// after the first connection ends.
pub async fn serve(endpoint: Endpoint, once: bool, params: FrameParams) -> anyhow::Result<()> {
    serve_with(endpoint, once, move |conn| serve_connection(conn, params)).await
}

async fn serve_connection(conn: quinn::Connection, params: FrameParams) -> anyhow::Result<()> {
    let peer = conn.remote_address();
    let (mut send, mut recv) = conn.accept_bi().await.context("accepting request stream")?;
    let mut buf = [0u8; RtcRequest::LEN];
    recv.read_exact(&mut buf).await.context("reading request")?;
    let req = RtcRequest::decode(&buf).context("request")?;
    if req.duration_ms > MAX_DURATION_MS {
        bail!(
            "{peer} asked for {} ms (at most {MAX_DURATION_MS})",
            req.duration_ms
        );
    }
    let frames = params.frame_count(req.duration_ms);
    tracing::info!(%peer, ?req, frames, ?params, "request");
    let mut payload = vec![0u8; params.frame_bytes()];
    fill_pattern(&mut payload);

    // The timer loop creates frames on schedule; one writer hands them to quinn in order, so a
    // stream limit or a full send window delays frames without shifting the schedule.
    let (tx, mut rx) = mpsc::channel::<(u32, Vec<u8>)>(MAX_BACKLOG_FRAMES);
    let writer = tokio::spawn({
        let conn = conn.clone();
        async move {
            while let Some((index, frame)) = rx.recv().await {
                let mut s = conn.open_uni().await.context("opening frame stream")?;
                // The older the frame, the higher its priority: quinn re-queues a stream with
                // lost data behind every pending stream of the same priority, so with one
                // priority for all a frame hit by a loss would wait for the whole backlog.
                s.set_priority(i32::try_from(index).map_or(i32::MIN, |i| -i))
                    .context("frame priority")?;
                s.write_all(&frame).await.context("sending frame")?;
                s.finish().context("finishing frame stream")?;
            }
            anyhow::Ok(())
        }
    });
    let start = tokio::time::Instant::now();
    for i in 0..frames {
        tokio::time::sleep_until(start + params.due(i)).await;
        let frame = encode_frame(i, unix_ns(SystemTime::now()), &payload);
        if tx.try_send((i, frame)).is_err() {
            // Full (backlog cap) or the writer stopped: its error says more.
            drop(tx);
            writer.await.context("frame writer")??;
            bail!("{peer}: more than {MAX_BACKLOG_FRAMES} frames waiting for the transport");
        }
    }
    drop(tx);
    writer.await.context("frame writer")??;
    send.write_all(
        &EndOfFrames {
            frames_sent: frames,
        }
        .encode(),
    )
    .await
    .context("sending end marker")?;
    send.finish().context("finishing request stream")?;
    // The client closes once it has every frame.
    let reason = conn.closed().await;
    tracing::info!(%peer, %reason, frames, "connection closed");
    Ok(())
}

/// Run one RTC session of `duration` as a quinn client against `connect` and return the report.
pub async fn run_client(
    connect: SocketAddr,
    duration: std::time::Duration,
) -> anyhow::Result<RtcReport> {
    let req = RtcRequest {
        duration_ms: u32::try_from(duration.as_millis()).context("duration too long")?,
    };
    let mut transport = transport_config(&TransportOptions::default())?;
    transport.max_concurrent_uni_streams(VarInt::from_u32(QUINN_CLIENT_MAX_CONCURRENT_UNI));
    let mut cfg = quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(client_tls(ALPN.to_vec())?).context("QUIC client TLS config")?,
    ));
    cfg.transport_config(Arc::new(transport));
    let socket = udp_socket(unspecified_for(connect)).context("binding client socket")?;
    let mut endpoint = Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .context("quinn endpoint")?;
    endpoint.set_default_client_config(cfg);
    let conn = endpoint
        .connect(connect, "localhost")
        .context("starting connection")?
        .await
        .with_context(|| format!("handshake with {connect}"))?;

    let (mut send, recv) = conn.open_bi().await.context("opening request stream")?;
    let start = Instant::now();
    send.write_all(&req.encode())
        .await
        .context("sending request")?;
    send.finish().context("finishing request")?;

    let (tx, mut rx) = mpsc::channel(1024);
    let acceptor = tokio::spawn(accept_frames(conn.clone(), tx));
    let end = read_end(recv);
    tokio::pin!(end);
    let mut frames_sent: Option<u32> = None;
    let mut log = FrameLog::default();
    let mut last = start;
    let result = loop {
        if let Some(n) = frames_sent
            && log.len() >= n as usize
        {
            break Ok(n);
        }
        tokio::select! {
            e = &mut end, if frames_sent.is_none() => match e {
                Ok(e) => frames_sent = Some(e.frames_sent),
                Err(e) => break Err(e),
            },
            f = rx.recv() => match f {
                Some(Ok((h, done))) => {
                    if log.record(&h, done) {
                        last = Instant::now();
                    }
                }
                Some(Err(e)) => break Err(e),
                None => break Err(anyhow::anyhow!("frame acceptor stopped")),
            },
        }
    };
    acceptor.abort();
    let frames_sent = result.with_context(|| {
        format!(
            "after {} frames (end marker {})",
            log.len(),
            frames_sent.map_or("not received".into(), |n| format!("says {n}"))
        )
    })?;
    conn.close(VarInt::from_u32(0), b"done");
    endpoint.wait_idle().await;
    Ok(log.report(Stack::Quinn, frames_sent, last - start))
}

type FrameResult = anyhow::Result<(FrameHeader, u64)>;

/// Accept the server's frame streams and read each in its own task; every complete frame (with
/// its completion time, `CLOCK_REALTIME` ns) or error goes to `tx`.
async fn accept_frames(conn: quinn::Connection, tx: mpsc::Sender<FrameResult>) {
    loop {
        match conn.accept_uni().await {
            Ok(stream) => {
                tokio::spawn(read_frame(stream, tx.clone()));
            }
            Err(e) => {
                let _ = tx
                    .send(Err(e).context("connection lost while receiving frames"))
                    .await;
                return;
            }
        }
    }
}

async fn read_frame(mut stream: quinn::RecvStream, tx: mpsc::Sender<FrameResult>) {
    let r = async {
        let mut reader = FrameReader::default();
        while let Some(chunk) = stream
            .read_chunk(usize::MAX, true)
            .await
            .context("receiving frame")?
        {
            reader.push(&chunk.bytes)?;
        }
        let done = unix_ns(SystemTime::now());
        Ok((reader.finish()?, done))
    }
    .await;
    let _ = tx.send(r).await;
}

async fn read_end(mut recv: quinn::RecvStream) -> anyhow::Result<EndOfFrames> {
    let mut buf = [0u8; EndOfFrames::LEN];
    recv.read_exact(&mut buf)
        .await
        .context("reading end marker")?;
    Ok(EndOfFrames::decode(&buf)?)
}

"""sidekick-transfer's client on aioquic (Python): a bulk download over the raw-stream protocol
(ALPN "sidekick-transfer") or HTTP/3 (ALPN "h3", GET /download/N then GET /stats), printing the
one-line JSON report of sidekick-transfer. A stack none of the proxy's inference was developed
against, for the lab's PEMI matrix (app.client_stack = "aioquic").

    sidekick-transfer-aioquic client --connect HOST:PORT --download BYTES [--json]
                                     [--timeout SECS] [--http3] [--stack aioquic]

Client only, downloads only: the lab's servers are the other stacks'. The wire format is
examples/src/transfer/mod.rs's (integers big-endian): request "SKT1", 'D', bytes u64; the
server's summary "SKS1" and six u64 (bytes, first/last byte Unix ns, sent, lost and
retransmitted packets) after the client finishes its side.

`receiver_sent_packets` counts the UDP datagrams the client sent (aioquic keeps no per-packet
counter; apart from the handshake's coalesced packets a receiver sends one packet per datagram).
"""

import argparse
import asyncio
import json
import ssl
import struct
import sys
import time

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived

ALPN_RAW = "sidekick-transfer"
REQUEST_MAGIC = b"SKT1"
SUMMARY_MAGIC = b"SKS1"
SUMMARY_LEN = 52


class TransferError(Exception):
    """A transfer that did not complete, with the reason."""


def parse_summary(data):
    """The server's summary (bytes, first/last byte ns, sent, lost, retransmitted)."""
    if len(data) < SUMMARY_LEN:
        raise TransferError(f"truncated summary: need {SUMMARY_LEN} bytes, have {len(data)}")
    if data[:4] != SUMMARY_MAGIC:
        raise TransferError("bad summary magic")
    return struct.unpack(">6Q", data[4:SUMMARY_LEN])


class TransferProtocol(QuicConnectionProtocol):
    """Collects one download (raw stream or HTTP/3) and counts the datagrams it sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # HTTP/3 from the start: the server's control and QPACK streams may arrive with the
        # handshake, before any request (a QPACK encoder stream missed there blocks every header
        # block that uses the dynamic table, as nghttp3's do).
        alpn = self._quic.configuration.alpn_protocols or []
        self.h3 = H3Connection(self._quic) if "h3" in alpn else None
        self.sent_datagrams = 0
        self.waiters = {}
        self.received = {}
        self.first_byte = None
        self.complete_at = {}  # stream id -> bytes that complete its awaited data

    def connection_made(self, transport):
        # Count the datagrams the connection hands to the socket.
        send = transport.sendto

        def counted(data, addr=None):
            self.sent_datagrams += 1
            return send(data, addr)

        transport.sendto = counted
        super().connection_made(transport)

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            for fut in self.waiters.values():
                if not fut.done():
                    fut.set_exception(TransferError(f"connection closed: {event.reason_phrase or event.error_code}"))
            return
        if self.h3 is not None:
            for h3_event in self.h3.handle_event(event):
                self._h3_event(h3_event)
            return
        if isinstance(event, StreamDataReceived):
            self._stream_data(event.stream_id, event.data, event.end_stream)

    def _h3_event(self, event):
        if isinstance(event, HeadersReceived):
            headers = dict(event.headers)
            status = headers.get(b":status", b"")
            if status != b"200":
                self._fail(event.stream_id, f"server answered {status.decode(errors='replace')}")
            # A response is complete at its content-length: some servers (quinn's h3) end
            # the request stream with STOP_SENDING and leave the FIN for later.
            length = headers.get(b"content-length")
            if length is not None and length.isdigit():
                self.complete_at[event.stream_id] = int(length)
            if event.stream_ended:
                self._stream_data(event.stream_id, b"", True)
        elif isinstance(event, DataReceived):
            self._stream_data(event.stream_id, event.data, event.stream_ended)

    def _stream_data(self, stream_id, data, end):
        if data and self.first_byte is None:
            self.first_byte = time.monotonic()
        buf = self.received.setdefault(stream_id, bytearray())
        buf.extend(data)
        fut = self.waiters.get(stream_id)
        if fut is None or fut.done():
            return
        want = self.complete_at.get(stream_id)
        if end or (want is not None and len(buf) >= want):
            fut.set_result(bytes(buf))

    def _fail(self, stream_id, reason):
        fut = self.waiters.get(stream_id)
        if fut is not None and not fut.done():
            fut.set_exception(TransferError(reason))

    def expect(self, stream_id, until_bytes=None):
        """A future for the stream's data: at its end, or once it holds `until_bytes`."""
        fut = self._loop.create_future()
        self.waiters[stream_id] = fut
        if until_bytes is not None:
            self.complete_at[stream_id] = until_bytes
        return fut

    async def raw_download(self, nbytes):
        sid = self._quic.get_next_available_stream_id()
        payload = self.expect(sid, until_bytes=nbytes)
        self._quic.send_stream_data(sid, REQUEST_MAGIC + b"D" + struct.pack(">Q", nbytes))
        self.transmit()
        if nbytes > 0:
            await payload
        done = time.monotonic()
        # The payload read: finish our side, the server answers with its summary and FIN.
        summary = self.expect(sid)
        self._quic.send_stream_data(sid, b"", end_stream=True)
        self.transmit()
        data = await summary
        if len(data) < nbytes + SUMMARY_LEN:
            raise TransferError(f"server finished after {len(data)} bytes of {nbytes} and its summary")
        return done, parse_summary(data[nbytes:])

    async def h3_get(self, path):
        sid = self._quic.get_next_available_stream_id()
        fut = self.expect(sid)
        self.h3.send_headers(
            stream_id=sid,
            headers=[
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", b"localhost"),
                (b":path", path.encode()),
            ],
            end_stream=True,
        )
        self.transmit()
        return await fut

    async def h3_download(self, nbytes):
        body = await self.h3_get(f"/download/{nbytes}")
        done = time.monotonic()
        if len(body) != nbytes:
            raise TransferError(f"download ended after {len(body)} of {nbytes} bytes")
        try:
            summary = parse_summary(await self.h3_get("/stats"))
        except TransferError:
            summary = None  # a server without /stats (ngtcp2's): its counters stay unknown
        return done, summary


async def run_client(host, port, nbytes, http3):
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN if http3 else [ALPN_RAW],
        verify_mode=ssl.CERT_NONE,  # the lab's servers have self-signed certificates
        server_name="localhost",
    )
    start = time.monotonic()
    async with connect(host, port, configuration=config, create_protocol=TransferProtocol) as proto:
        if http3:
            done, summary = await proto.h3_download(nbytes)
        else:
            done, summary = await proto.raw_download(nbytes)
        secs = done - start
        report = {
            "stack": "aioquic",
            "direction": "download",
            "bytes": nbytes,
            "duration_s": secs,
            "goodput_mbps": nbytes * 8 / secs / 1e6 if secs > 0 else 0.0,
            "receiver_sent_packets": proto.sent_datagrams,
        }
        if summary is not None:
            report["sent_packets"], report["lost_packets"], report["retransmissions"] = summary[3:6]
        if proto.first_byte is not None and not http3:
            report["ttfb_ms"] = (proto.first_byte - start) * 1000
        proto.close()
        return report


def main(argv):
    parser = argparse.ArgumentParser(prog="sidekick-transfer-aioquic")
    sub = parser.add_subparsers(dest="command", required=True)
    cli = sub.add_parser("client", help="download from a sidekick-transfer server")
    cli.add_argument("--connect", required=True, help="HOST:PORT")
    cli.add_argument("--download", type=int, help="bytes to download")
    cli.add_argument("--upload", type=int, help="not supported (client downloads only)")
    cli.add_argument("--json", action="store_true", help="print exactly one JSON line")
    cli.add_argument("--timeout", type=float, default=60.0, help="seconds")
    cli.add_argument("--http3", action="store_true", help="HTTP/3 instead of the raw stream")
    cli.add_argument("--stack", default="aioquic", help="must be aioquic (accepted for the lab)")
    args = parser.parse_args(argv)
    if args.stack != "aioquic":
        parser.error(f"this client is aioquic, not {args.stack}")
    if args.upload is not None or args.download is None:
        parser.error("the aioquic client downloads only: give --download BYTES")
    host, _, port = args.connect.rpartition(":")
    try:
        report = asyncio.run(
            asyncio.wait_for(run_client(host, int(port), args.download, args.http3), args.timeout)
        )
    except (TransferError, OSError, ConnectionError, asyncio.TimeoutError) as e:
        print(f"sidekick-transfer-aioquic: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"aioquic download {report['bytes']} bytes in {report['duration_s']:.3f} s: "
            f"{report['goodput_mbps']:.2f} Mbit/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

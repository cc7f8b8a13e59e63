package sidekick.transfer;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.Locale;

/**
 * The wire format of sidekick-transfer's raw-stream protocol (examples/src/transfer/mod.rs;
 * integers big-endian): the client's request, the server's summary, the payload pattern and the
 * client's one-line JSON report.
 */
final class Wire {
    static final int REQUEST_LEN = 13; // "SKT1", direction 'D'|'U', bytes u64
    static final int SUMMARY_LEN = 52; // "SKS1", six u64 fields
    static final int CHUNK = 64 * 1024;
    static final byte DOWNLOAD = 'D';
    static final byte UPLOAD = 'U';

    private Wire() {}

    /** The client's first bytes on the stream. */
    record Request(byte direction, long bytes) {
        byte[] encode() {
            return ByteBuffer.allocate(REQUEST_LEN)
                    .put(new byte[] {'S', 'K', 'T', '1'})
                    .put(direction)
                    .putLong(bytes)
                    .array();
        }

        static Request decode(byte[] b) throws IOException {
            ByteBuffer buf = ByteBuffer.wrap(b);
            if (b.length < REQUEST_LEN || buf.getInt() != 0x534B5431) {
                throw new IOException("bad request magic");
            }
            byte dir = buf.get();
            if (dir != DOWNLOAD && dir != UPLOAD) {
                throw new IOException(String.format("unknown direction byte %#x", dir));
            }
            long n = buf.getLong();
            if (n < 0) {
                throw new IOException("request of more than 2^63 bytes");
            }
            return new Request(dir, n);
        }

        String directionName() {
            return direction == UPLOAD ? "upload" : "download";
        }
    }

    /** The server's last bytes on the stream: what it sent or received, and its counters. */
    record Summary(
            long bytes,
            long firstByteUnixNs,
            long lastByteUnixNs,
            long sentPackets,
            long lostPackets,
            long retransmissions) {
        byte[] encode() {
            return ByteBuffer.allocate(SUMMARY_LEN)
                    .put(new byte[] {'S', 'K', 'S', '1'})
                    .putLong(bytes)
                    .putLong(firstByteUnixNs)
                    .putLong(lastByteUnixNs)
                    .putLong(sentPackets)
                    .putLong(lostPackets)
                    .putLong(retransmissions)
                    .array();
        }

        static Summary decode(byte[] b) throws IOException {
            ByteBuffer buf = ByteBuffer.wrap(b);
            if (b.length < SUMMARY_LEN || buf.getInt() != 0x534B5331) {
                throw new IOException("bad summary magic");
            }
            return new Summary(
                    buf.getLong(), buf.getLong(), buf.getLong(), buf.getLong(), buf.getLong(),
                    buf.getLong());
        }
    }

    /** One chunk of the payload pattern (fill_pattern: byte i is i mod 251, per chunk). */
    static byte[] patternChunk() {
        byte[] b = new byte[CHUNK];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (i % 251);
        }
        return b;
    }

    /** Reads exactly b.length bytes. */
    static void readFully(InputStream in, byte[] b) throws IOException {
        int off = 0;
        while (off < b.length) {
            int n = in.read(b, off, b.length - off);
            if (n < 0) {
                throw new EOFException("stream ended after " + off + " of " + b.length + " bytes");
            }
            off += n;
        }
    }

    /** The wall clock in ns since the Unix epoch. */
    static long unixNs(Instant t) {
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    /** The client's report, with the keys of sidekick-transfer's TransferReport. */
    record Report(
            String stack,
            String direction,
            long bytes,
            double durationS,
            long retransmissions,
            long lostPackets,
            long sentPackets,
            long receiverSentPackets,
            Double ttfbMs) {
        double goodputMbps() {
            return durationS > 0 ? bytes * 8 / durationS / 1e6 : 0;
        }

        String json() {
            StringBuilder s = new StringBuilder();
            s.append(String.format(Locale.ROOT,
                    "{\"stack\":\"%s\",\"direction\":\"%s\",\"bytes\":%d,\"duration_s\":%.6f,"
                            + "\"goodput_mbps\":%.6f,\"retransmissions\":%d,\"lost_packets\":%d,"
                            + "\"sent_packets\":%d,\"receiver_sent_packets\":%d",
                    stack, direction, bytes, durationS, goodputMbps(), retransmissions,
                    lostPackets, sentPackets, receiverSentPackets));
            if (ttfbMs != null) {
                s.append(String.format(Locale.ROOT, ",\"ttfb_ms\":%.3f", ttfbMs));
            }
            return s.append('}').toString();
        }
    }
}

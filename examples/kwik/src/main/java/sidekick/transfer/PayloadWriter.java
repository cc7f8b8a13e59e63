package sidekick.transfer;

import java.io.IOException;
import java.io.OutputStream;

/**
 * Writes a payload on a kwik stream with a kicker beside it.
 *
 * <p>Why: kwik (0.10.8, and 0.10.9 has the same code) can lose the wake-up of a stream's sender.
 * A write queues a send request only when its counter reads zero and increments the counter
 * after queueing; when the sender runs that request before the increment, the counter ends at
 * zero with no request queued, and the sender's own follow-up request (it queues one while data
 * remains) was skipped because it read -1. Data then sits in the stream's 50 KB send buffer with
 * nothing to send it, and a writer blocked on the full buffer waits forever. On loopback 8 of 48
 * transfers of 0.5 MB stalled so. Every write re-arms the sender, so a zero-length write is a
 * kick: the kicker makes one every {@value #KICK_MS} ms while the payload is written and until
 * the caller says it has been delivered. A zero-length write leaves an empty buffer in kwik's
 * send queue, harmless between data but fatal right before the end of the stream (the FIN is
 * never sent), so the kicker stops before the stream's last bytes are written. The kicker's
 * writes run beside the payload's, which kwik's send buffer does not promise to order; an empty
 * write adds nothing to order (a concurrent queue and an atomic byte count take it).
 *
 * <p>Call order: {@link #write}, then either {@link #stop} once the peer has everything and
 * before the next write (server), or {@link #finish} (client: the last piece and the FIN).
 */
final class PayloadWriter {
    static final long KICK_MS = 5;
    /** Under half of kwik's send buffer: each write is buffered whole. */
    static final int PIECE = 16 * 1024;

    private final OutputStream out;
    private final Thread kicker;
    private volatile boolean kicking = true;

    PayloadWriter(OutputStream out) {
        this.out = out;
        this.kicker = new Thread(this::kick, "kicker");
        kicker.setDaemon(true);
        kicker.start();
    }

    private void kick() {
        byte[] none = new byte[0];
        while (kicking) {
            try {
                Thread.sleep(KICK_MS);
                if (kicking) {
                    out.write(none, 0, 0);
                }
            } catch (InterruptedException | IOException e) {
                return;
            }
        }
    }

    /** Writes n bytes of the payload pattern, in pieces of at most {@value #PIECE} bytes. */
    void write(long n) throws IOException {
        byte[] chunk = Wire.patternChunk();
        while (n > 0) {
            // The pattern restarts every chunk, as the other stacks write it.
            int k = (int) Math.min(n, chunk.length);
            for (int off = 0; off < k; off += PIECE) {
                out.write(chunk, off, Math.min(PIECE, k - off));
            }
            n -= k;
        }
    }

    /** Stops the kicker (waits for it), so that the next write is not preceded by a kick. */
    void stop() {
        kicking = false;
        kicker.interrupt();
        try {
            kicker.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Writes n bytes of the payload pattern and ends the stream: all but the last byte with the
     * kicker, the last byte and the FIN after it stopped.
     */
    void finish(long n) throws IOException {
        if (n > 1) {
            write(n - 1);
        }
        stop();
        if (n > 0) {
            // Byte n-1 of the pattern: the pattern restarts every chunk.
            out.write((int) (((n - 1) % Wire.CHUNK) % 251));
        }
        out.close();
    }
}

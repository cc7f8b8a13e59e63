package sidekick.transfer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import tech.kwik.core.QuicClientConnection;
import tech.kwik.core.QuicConnection;
import tech.kwik.core.QuicStream;
import tech.kwik.core.Statistics;
import tech.kwik.core.log.NullLogger;
import tech.kwik.core.server.ApplicationProtocolConnection;
import tech.kwik.core.server.ServerConnectionConfig;
import tech.kwik.core.server.ServerConnector;

/**
 * sidekick-transfer-kwik: sidekick-transfer (examples/src/bin/sidekick-transfer.rs) on kwik, a
 * QUIC stack in Java with its own loss recovery (NewReno), ACK policy and flow control, none of
 * which the proxy's inference was developed against. Raw-stream protocol only (ALPN
 * "sidekick-transfer"; kwik has no HTTP/3), both directions, the same one-line JSON report.
 *
 * <pre>
 * sidekick-transfer-kwik server [--stack kwik] --listen IP:PORT [--once] --keystore FILE
 * sidekick-transfer-kwik client [--stack kwik] --connect IP:PORT (--download N | --upload N)
 *                               [--json] [--timeout SECS] [--cc cubic|newreno]
 * </pre>
 */
public final class Main {
    static final String STACK = "kwik";
    static final String ALPN = "sidekick-transfer";
    static final int IDLE_TIMEOUT_S = 30;
    /** How long a --once server lingers after its transfer: its client closes meanwhile. */
    static final long ONCE_LINGER_MS = 2_000;
    /** Flow-control windows: a download's whole payload may sit in flight on the lab's links. */
    static final long RECEIVE_BUFFER = 8L << 20;

    private Main() {}

    public static void main(String[] args) {
        if (args.length < 1) {
            usage();
            System.exit(2);
        }
        try {
            Map<String, String> flags = parseFlags(args);
            switch (args[0]) {
                case "server" -> serve(flags);
                case "client" -> client(flags);
                case "help", "--help", "-h" -> usage();
                default -> {
                    usage();
                    System.exit(2);
                }
            }
        } catch (Exception e) {
            System.err.println("sidekick-transfer-kwik: " + e.getMessage());
            System.exit(1);
        }
        // kwik's threads are not all daemons: the process ends here.
        System.exit(0);
    }

    static void usage() {
        System.err.println("Bulk transfer over QUIC on kwik, interoperable with sidekick-transfer.\n\n"
                + "Usage:\n"
                + "  sidekick-transfer-kwik server [--stack kwik] --listen IP:PORT [--once] --keystore FILE\n"
                + "  sidekick-transfer-kwik client [--stack kwik] --connect IP:PORT (--download N | --upload N)\n"
                + "                                [--json] [--timeout SECS] [--cc cubic|newreno]");
    }

    /** Flags with a value and switches (value "true"); an unknown flag is an error. */
    static Map<String, String> parseFlags(String[] args) {
        Set<String> switches = Set.of("--once", "--json", "--http3", "--sidekick");
        Set<String> valued = Set.of("--stack", "--listen", "--keystore", "--connect", "--download",
                "--upload", "--timeout", "--cc");
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            String value = null;
            int eq = a.indexOf('=');
            if (eq > 0) {
                value = a.substring(eq + 1);
                a = a.substring(0, eq);
            }
            if (switches.contains(a)) {
                m.put(a, "true");
            } else if (valued.contains(a)) {
                if (value == null) {
                    if (++i >= args.length) {
                        throw new IllegalArgumentException(a + " needs a value");
                    }
                    value = args[i];
                }
                m.put(a, value);
            } else {
                throw new IllegalArgumentException("unknown flag " + a);
            }
        }
        String stack = m.getOrDefault("--stack", STACK);
        if (!stack.equals(STACK)) {
            throw new IllegalArgumentException("--stack " + stack + ": this binary runs kwik");
        }
        if (m.containsKey("--http3")) {
            throw new IllegalArgumentException(
                    "--http3: kwik has no HTTP/3; it speaks the raw stream protocol only");
        }
        if (m.containsKey("--sidekick")) {
            throw new IllegalArgumentException(
                    "--sidekick: the SDK has no kwik integration; use a quinn or quiche client");
        }
        return m;
    }

    static InetSocketAddress parseAddr(String flag, String s) {
        int colon = s.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException(flag + " " + s + ": want IP:PORT");
        }
        String host = s.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        return new InetSocketAddress(host, Integer.parseInt(s.substring(colon + 1)));
    }

    // ---- server ----

    static void serve(Map<String, String> flags) throws Exception {
        String listen = flags.get("--listen");
        if (listen == null) {
            throw new IllegalArgumentException("--listen is required");
        }
        String keystore = flags.get("--keystore");
        if (keystore == null) {
            throw new IllegalArgumentException("--keystore is required (the launcher passes it)");
        }
        boolean once = flags.containsKey("--once");
        InetSocketAddress addr = parseAddr("--listen", listen);
        KeyStore keys = keyStore(Path.of(keystore));
        ServerConnectionConfig config = ServerConnectionConfig.builder()
                .maxIdleTimeoutInSeconds(IDLE_TIMEOUT_S)
                .maxOpenPeerInitiatedBidirectionalStreams(16)
                .maxOpenPeerInitiatedUnidirectionalStreams(0)
                .maxBidirectionalStreamBufferSize(RECEIVE_BUFFER)
                .maxConnectionBufferSize(RECEIVE_BUFFER)
                .build();
        ServerConnector connector = ServerConnector.builder()
                .withSocket(new DatagramSocket(addr))
                .withKeyStore(keys, KEY_ALIAS, KEY_PASSWORD, "secp256r1")
                .withConfiguration(config)
                .withLogger(new NullLogger())
                .build();
        CountDownLatch firstServed = new CountDownLatch(1);
        connector.registerApplicationProtocol(ALPN, (protocol, conn) -> new ApplicationProtocolConnection() {
            @Override
            public void acceptPeerInitiatedStream(QuicStream stream) {
                // kwik calls this on its receiver thread: the transfer runs on its own.
                Thread t = new Thread(() -> {
                    try {
                        answerRequest(stream, conn);
                    } catch (Exception e) {
                        log("connection failed: " + e.getMessage());
                        conn.close(1, "server error");
                    } finally {
                        firstServed.countDown();
                    }
                }, "transfer");
                t.setDaemon(true);
                t.start();
            }
        });
        connector.start();
        log("listening addr=" + addr + " stack=" + STACK);
        if (once) {
            firstServed.await();
            // The client closes the connection once it has the summary; give it that time.
            Thread.sleep(ONCE_LINGER_MS);
            connector.close();
            return;
        }
        new CountDownLatch(1).await();
    }

    /** The server's side of one raw-stream transfer on stream. */
    static void answerRequest(QuicStream stream, QuicConnection conn) throws IOException {
        InputStream in = stream.getInputStream();
        OutputStream out = stream.getOutputStream();
        byte[] hdr = new byte[Wire.REQUEST_LEN];
        Wire.readFully(in, hdr);
        Wire.Request req = Wire.Request.decode(hdr);
        log("request direction=" + req.directionName() + " bytes=" + req.bytes());
        Wire.Summary sum;
        if (req.direction() == Wire.DOWNLOAD) {
            PayloadWriter payload = new PayloadWriter(out);
            try {
                payload.write(req.bytes());
                // The client finishes its side once it holds every byte.
                byte[] sink = new byte[Wire.CHUNK];
                while (in.read(sink) >= 0) {
                    // discard
                }
            } finally {
                payload.stop();
            }
            Statistics s = conn.getStats();
            sum = new Wire.Summary(req.bytes(), 0, 0, s.packetsSent(), s.lostPackets(), s.lostPackets());
        } else {
            byte[] buf = new byte[Wire.CHUNK];
            long got = 0;
            long first = 0;
            long last = 0;
            int n;
            while ((n = in.read(buf)) >= 0) {
                if (n > 0 && got == 0) {
                    first = Wire.unixNs(Instant.now());
                }
                got += n;
                if (got >= req.bytes() && last == 0) {
                    last = Wire.unixNs(Instant.now());
                }
            }
            if (got != req.bytes()) {
                throw new IOException("upload: got " + got + " of " + req.bytes() + " bytes");
            }
            Statistics s = conn.getStats();
            sum = new Wire.Summary(got, first, last, s.packetsSent(), s.lostPackets(), s.lostPackets());
        }
        out.write(sum.encode());
        out.close();
    }

    static final String KEY_ALIAS = "sidekick";
    static final char[] KEY_PASSWORD = "sidekick".toCharArray();

    /**
     * The server's key and self-signed certificate (P-256, CN localhost; the clients accept any),
     * PKCS#12 with alias and password "sidekick": scripts/build-kwik.sh makes it once and its
     * launcher passes it as --keystore.
     */
    static KeyStore keyStore(Path file) throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(file)) {
            ks.load(in, KEY_PASSWORD);
        }
        return ks;
    }

    // ---- client ----

    static void client(Map<String, String> flags) throws Exception {
        String connect = flags.get("--connect");
        long down = Long.parseLong(flags.getOrDefault("--download", "0"));
        long up = Long.parseLong(flags.getOrDefault("--upload", "0"));
        if (connect == null || (down == 0) == (up == 0) || down < 0 || up < 0) {
            throw new IllegalArgumentException(
                    "--connect and exactly one of --download N / --upload N (N > 0) are required");
        }
        String cc = flags.getOrDefault("--cc", "cubic");
        if (!List.of("cubic", "newreno", "reno").contains(cc)) {
            throw new IllegalArgumentException("--cc " + cc + ": kwik runs NewReno");
        }
        double timeout = Double.parseDouble(flags.getOrDefault("--timeout", "120"));
        if (!(timeout > 0 && timeout <= 86400)) {
            throw new IllegalArgumentException("--timeout " + timeout + " out of range");
        }
        // One deadline for the whole transfer, as the other clients' --timeout.
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep((long) (timeout * 1000));
                System.err.println("sidekick-transfer-kwik: timed out after " + timeout + " s");
                Runtime.getRuntime().halt(1);
            } catch (InterruptedException e) {
                // finished in time
            }
        }, "deadline");
        watchdog.setDaemon(true);
        watchdog.start();
        Wire.Request req = up > 0 ? new Wire.Request(Wire.UPLOAD, up) : new Wire.Request(Wire.DOWNLOAD, down);
        InetSocketAddress addr = parseAddr("--connect", connect);
        Wire.Report rep = transfer(addr, req);
        watchdog.interrupt();
        if (flags.containsKey("--json")) {
            System.out.println(rep.json());
        } else {
            System.out.printf(java.util.Locale.ROOT, "%s %s %d bytes in %.3f s: %.2f Mbit/s (sender: %d packets, %d lost)%n",
                    rep.stack(), rep.direction(), rep.bytes(), rep.durationS(), rep.goodputMbps(),
                    rep.sentPackets(), rep.lostPackets());
        }
    }

    /** Dials addr, runs one raw-stream transfer and closes the connection. */
    static Wire.Report transfer(InetSocketAddress addr, Wire.Request req) throws Exception {
        InetAddress ip = addr.getAddress();
        String host = ip.getHostAddress();
        if (host.contains(":")) {
            host = "[" + host + "]";
        }
        Instant dialed = Instant.now();
        // kwik prints a warning about the unchecked certificate on stdout, where the report goes.
        java.io.PrintStream stdout = System.out;
        System.setOut(System.err);
        QuicClientConnection conn;
        try {
            conn = buildConnection(host, addr.getPort());
        } finally {
            System.setOut(stdout);
        }
        try {
            conn.connect();
        } catch (IOException e) {
            throw new IOException("handshake with " + addr + ": " + e.getMessage(), e);
        }
        try {
            Wire.Report rep = exchange(conn, req, dialed);
            conn.close();
            return rep;
        } catch (Exception e) {
            conn.close(1, "client error");
            throw e;
        }
    }

    static QuicClientConnection buildConnection(String host, int port) throws IOException {
        return QuicClientConnection.newBuilder()
                .uri(URI.create("https://" + host + ":" + port))
                .applicationProtocol(ALPN)
                // The lab's servers have self-signed certificates, as for the other clients.
                .noServerCertificateCheck()
                .maxIdleTimeout(Duration.ofSeconds(IDLE_TIMEOUT_S))
                .connectTimeout(Duration.ofSeconds(10))
                .defaultStreamReceiveBufferSize(RECEIVE_BUFFER)
                .logger(new NullLogger())
                .build();
    }

    /** The client's side of one transfer on a new stream of conn. */
    static Wire.Report exchange(QuicClientConnection conn, Wire.Request req, Instant dialed) throws IOException {
        QuicStream stream = conn.createStream(true);
        InputStream in = stream.getInputStream();
        OutputStream out = stream.getOutputStream();
        long start = System.nanoTime();
        long startWall = Wire.unixNs(Instant.now());
        out.write(req.encode());
        out.flush();
        if (req.direction() == Wire.DOWNLOAD) {
            // The first byte alone first: its arrival is the time to first byte.
            int b = in.read();
            if (b < 0) {
                throw new IOException("server sent no payload");
            }
            Instant firstByte = Instant.now();
            long got = 1;
            byte[] buf = new byte[Wire.CHUNK];
            while (got < req.bytes()) {
                int n = in.read(buf, 0, (int) Math.min(buf.length, req.bytes() - got));
                if (n < 0) {
                    throw new IOException("server finished after " + got + " of " + req.bytes() + " bytes");
                }
                got += n;
            }
            double secs = (System.nanoTime() - start) / 1e9;
            out.close();
            byte[] s = new byte[Wire.SUMMARY_LEN];
            Wire.readFully(in, s);
            Wire.Summary sum = Wire.Summary.decode(s);
            double ttfb = Duration.between(dialed, firstByte).toNanos() / 1e6;
            return new Wire.Report(STACK, "download", req.bytes(), secs, sum.retransmissions(),
                    sum.lostPackets(), sum.sentPackets(), conn.getStats().packetsSent(), ttfb);
        }
        new PayloadWriter(out).finish(req.bytes());
        byte[] s = new byte[Wire.SUMMARY_LEN];
        Wire.readFully(in, s);
        long elapsedNs = System.nanoTime() - start;
        Wire.Summary sum = Wire.Summary.decode(s);
        // The server's request-to-last-byte time when it lies within the client's elapsed time
        // (same host or synchronised clocks), else the client's (upload_duration in mod.rs).
        long d = elapsedNs;
        if (sum.lastByteUnixNs() >= startWall) {
            long server = sum.lastByteUnixNs() - startWall;
            if (server > 0 && server <= elapsedNs) {
                d = server;
            }
        }
        Statistics own = conn.getStats();
        return new Wire.Report(STACK, "upload", req.bytes(), d / 1e9, own.lostPackets(),
                own.lostPackets(), own.packetsSent(), sum.sentPackets(), null);
    }

    static void log(String msg) {
        System.err.println(Instant.now() + " " + msg);
    }
}

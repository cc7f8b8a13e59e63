package sidekick.transfer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The raw-stream framing: the shared vectors, round trips, and arbitrary bytes from the wire. */
class WireTest {
    // What examples/src/transfer/mod.rs (and the Go transfer) encode for Request { Upload,
    // 10_000_000 } and Summary { 1, 2, 3, 4, 5, 6 }.
    static final String VEC_REQUEST = "534b5431550000000000989680";
    static final String VEC_SUMMARY = "534b5331" + "0000000000000001" + "0000000000000002"
            + "0000000000000003" + "0000000000000004" + "0000000000000005" + "0000000000000006";

    @Test
    void sharedVectors() throws IOException {
        byte[] req = HexFormat.of().parseHex(VEC_REQUEST);
        Wire.Request r = new Wire.Request(Wire.UPLOAD, 10_000_000);
        assertArrayEquals(req, r.encode());
        assertEquals(r, Wire.Request.decode(req));
        byte[] sum = HexFormat.of().parseHex(VEC_SUMMARY);
        Wire.Summary s = new Wire.Summary(1, 2, 3, 4, 5, 6);
        assertArrayEquals(sum, s.encode());
        assertEquals(s, Wire.Summary.decode(sum));
    }

    @Test
    void badRequestsAreRefused() {
        assertThrows(IOException.class, () -> Wire.Request.decode("SKT1D".getBytes()));
        assertThrows(IOException.class, () -> Wire.Request.decode("SKT1X00000000".getBytes()));
        assertThrows(IOException.class, () -> Wire.Summary.decode(new byte[Wire.SUMMARY_LEN]));
    }

    /** Property: every request and summary survives encode then decode. */
    @Test
    void roundTrips() throws IOException {
        Random rng = new Random(1);
        for (int i = 0; i < 20_000; i++) {
            Wire.Request r = new Wire.Request(rng.nextBoolean() ? Wire.DOWNLOAD : Wire.UPLOAD,
                    rng.nextLong() & Long.MAX_VALUE);
            assertEquals(r, Wire.Request.decode(r.encode()));
            Wire.Summary s = new Wire.Summary(rng.nextLong(), rng.nextLong(), rng.nextLong(),
                    rng.nextLong(), rng.nextLong(), rng.nextLong());
            assertEquals(s, Wire.Summary.decode(s.encode()));
        }
    }

    /**
     * Property: arbitrary bytes, and valid frames with bytes flipped or cut, either decode or
     * are refused with an IOException (never another exception), as the Go fuzz target checks.
     */
    @Test
    void arbitraryBytesDecodeOrAreRefused() {
        Random rng = new Random(2);
        byte[][] seeds = {
            HexFormat.of().parseHex(VEC_REQUEST), HexFormat.of().parseHex(VEC_SUMMARY), new byte[0],
        };
        for (int i = 0; i < 100_000; i++) {
            byte[] b;
            if (rng.nextBoolean()) {
                b = new byte[rng.nextInt(80)];
                rng.nextBytes(b);
            } else {
                byte[] seed = seeds[rng.nextInt(seeds.length)];
                b = java.util.Arrays.copyOf(seed, rng.nextInt(seed.length + 8));
                if (b.length > 0) {
                    b[rng.nextInt(b.length)] ^= (byte) (1 + rng.nextInt(255));
                }
            }
            try {
                Wire.Request.decode(b);
            } catch (IOException e) {
                // refused
            }
            try {
                Wire.Summary.decode(b);
            } catch (IOException e) {
                // refused
            }
        }
    }
}

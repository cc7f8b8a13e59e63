//! The Packrat cache's storage: one preallocated byte ring holding the cached frames back to back
//! in forwarding order (Packrat (CoNEXT '26) §6.1 "Cache Management": a FIFO cache bounded in bytes).
//!
//! The ring's capacity is the cache's byte cap, so frames whose lengths add up to at most the cap
//! always fit: there are no gaps — a frame that reaches the end of the buffer continues at its
//! start. Inserting a frame is one or two `memcpy`s and never allocates (the buffer is allocated
//! once, at the first insertion). Frames leave from the front (FIFO eviction) or, after an eACK,
//! anywhere: [`FrameRing::relocate`] then slides the frames that stay towards the front so the
//! ring is contiguous again.

/// A byte ring of fixed capacity. Positions are physical offsets into the buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct FrameRing {
    buf: Vec<u8>,
    cap: usize,
    head: usize,
    used: usize,
}

impl FrameRing {
    /// An empty ring of `cap` bytes; the buffer is allocated at the first [`FrameRing::push`].
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            head: 0,
            used: 0,
        }
    }

    /// Bytes stored.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Bytes allocated (0 until the first push, then the capacity).
    pub(crate) fn allocated(&self) -> usize {
        self.buf.len()
    }

    /// `x` (< 2·cap) reduced into the buffer.
    #[inline]
    fn wrap(&self, x: usize) -> usize {
        if x >= self.cap { x - self.cap } else { x }
    }

    /// Logical offset (from the front) of physical position `at`.
    #[inline]
    fn logical(&self, at: usize) -> usize {
        self.wrap(at + self.cap - self.head)
    }

    /// Append `src` at the back; returns its physical start. The caller has made room:
    /// `used() + src.len() <= cap`.
    #[inline]
    pub(crate) fn push(&mut self, src: &[u8]) -> usize {
        debug_assert!(self.used + src.len() <= self.cap);
        if self.buf.len() != self.cap {
            self.buf = vec![0; self.cap];
        }
        let at = self.wrap(self.head + self.used);
        let first = src.len().min(self.cap - at);
        let (a, b) = src.split_at(first);
        self.buf[at..at + first].copy_from_slice(a);
        if !b.is_empty() {
            self.buf[..b.len()].copy_from_slice(b);
        }
        self.used += src.len();
        at
    }

    /// Drop the front `len` bytes (the oldest frame).
    #[inline]
    pub(crate) fn pop_front(&mut self, len: usize) {
        debug_assert!(len <= self.used);
        self.head = self.wrap(self.head + len);
        self.used -= len;
        if self.used == 0 {
            self.head = 0;
        }
    }

    /// Append the `len` bytes stored at physical `at` to `dst`.
    pub(crate) fn copy_out(&self, at: usize, len: usize, dst: &mut Vec<u8>) {
        let first = len.min(self.cap - at);
        dst.extend_from_slice(&self.buf[at..at + first]);
        dst.extend_from_slice(&self.buf[..len - first]);
    }

    /// Move the `len` bytes at physical `at` to logical offset `to` (≤ their current logical
    /// offset) and return their new physical start. Used front to back to compact the ring.
    pub(crate) fn relocate(&mut self, at: usize, len: usize, to: usize) -> usize {
        if len == 0 {
            // (An empty frame's position can be ambiguous in a full ring; it has no bytes.)
            return self.wrap(self.head + to);
        }
        let mut from = self.logical(at);
        debug_assert!(to <= from && from + len <= self.used);
        let start = self.wrap(self.head + to);
        let mut to = to;
        let mut left = len;
        if from == to {
            return start;
        }
        // Chunks that wrap neither at the source nor at the destination; each is a memmove, and
        // since the destination is logically before the source, a chunk never overwrites bytes
        // a later chunk still has to read.
        while left > 0 {
            let s = self.wrap(self.head + from);
            let d = self.wrap(self.head + to);
            let n = left.min(self.cap - s).min(self.cap - d);
            self.buf.copy_within(s..s + n, d);
            from += n;
            to += n;
            left -= n;
        }
        start
    }

    /// Keep only the front `len` bytes (after compaction).
    pub(crate) fn truncate(&mut self, len: usize) {
        debug_assert!(len <= self.used);
        self.used = len;
        if self.used == 0 {
            self.head = 0;
        }
    }

    /// Forget every frame (the buffer is kept).
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn frame(tag: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
    }

    fn read(r: &FrameRing, at: usize, len: usize) -> Vec<u8> {
        let mut v = Vec::new();
        r.copy_out(at, len, &mut v);
        v
    }

    #[test]
    fn frames_wrap_around_the_end() {
        let mut r = FrameRing::new(10);
        assert_eq!(r.allocated(), 0);
        let a = r.push(&frame(1, 6));
        assert_eq!((a, r.used(), r.allocated()), (0, 6, 10));
        let x = r.push(&frame(9, 1));
        r.pop_front(6);
        let a = r.push(&frame(2, 2));
        let b = r.push(&frame(3, 5));
        // The third frame starts at 9 and continues at 0.
        assert_eq!((x, a, b), (6, 7, 9));
        assert_eq!(read(&r, a, 2), frame(2, 2));
        assert_eq!(read(&r, b, 5), frame(3, 5));
        assert_eq!(r.used(), 8);
        // A full ring: exactly the capacity.
        let c = r.push(&frame(4, 2));
        assert_eq!((c, r.used()), (4, 10));
        assert_eq!(read(&r, c, 2), frame(4, 2));
        assert_eq!(read(&r, b, 5), frame(3, 5));
        assert_eq!(read(&r, x, 1), frame(9, 1));
        // Emptying it restarts at the beginning of the buffer.
        r.pop_front(1);
        r.pop_front(2);
        r.pop_front(5);
        r.pop_front(2);
        assert_eq!((r.used(), r.push(&frame(5, 3))), (0, 0));
    }

    #[test]
    fn relocation_across_the_end() {
        let mut r = FrameRing::new(10);
        r.push(&frame(0, 7));
        let x = r.push(&frame(50, 1));
        r.pop_front(7);
        // head = 7: x at 7, a at 8..11 (wraps to 0), c at 1..5.
        let a = r.push(&frame(10, 3));
        let c = r.push(&frame(30, 4));
        assert_eq!((x, a, c), (7, 8, 1));
        assert_eq!(read(&r, a, 3), frame(10, 3));
        // Drop x and a; slide c to the front: it now wraps (7..10, then 0).
        let c2 = r.relocate(c, 4, 0);
        r.truncate(4);
        assert_eq!(c2, 7);
        assert_eq!(read(&r, c2, 4), frame(30, 4));
        let d = r.push(&frame(40, 6));
        assert_eq!(d, 1);
        assert_eq!(read(&r, d, 6), frame(40, 6));
        assert_eq!(read(&r, c2, 4), frame(30, 4));
        assert_eq!(r.used(), 10);
    }

    proptest! {
        /// Against a model: a FIFO of frames with a byte cap; random pushes (evicting the oldest
        /// when needed) and random removals anywhere followed by compaction. Every stored frame
        /// reads back intact and the ring never holds more than its capacity.
        #[test]
        fn matches_a_fifo_model(
            cap in 1usize..300,
            ops in proptest::collection::vec((0u8..4, 0usize..120, any::<u64>()), 1..200),
        ) {
            let mut r = FrameRing::new(cap);
            let mut model: VecDeque<(usize, Vec<u8>)> = VecDeque::new();
            for (k, (op, len, mask)) in ops.into_iter().enumerate() {
                if op < 3 {
                    let f = frame(k as u8, len);
                    if len > cap {
                        continue;
                    }
                    while r.used() + len > cap {
                        let (_, old) = model.pop_front().unwrap();
                        r.pop_front(old.len());
                    }
                    let at = r.push(&f);
                    model.push_back((at, f));
                } else {
                    // Remove the frames whose bit in `mask` is set; compact the rest.
                    let mut w = 0;
                    let mut kept = VecDeque::new();
                    for (i, (at, f)) in model.drain(..).enumerate() {
                        if mask >> (i % 64) & 1 == 0 {
                            let at = r.relocate(at, f.len(), w);
                            w += f.len();
                            kept.push_back((at, f));
                        }
                    }
                    r.truncate(w);
                    model = kept;
                }
                prop_assert!(r.used() <= cap);
                prop_assert_eq!(r.used(), model.iter().map(|(_, f)| f.len()).sum::<usize>());
                for (at, f) in &model {
                    prop_assert_eq!(&read(&r, *at, f.len()), f);
                }
            }
        }
    }
}

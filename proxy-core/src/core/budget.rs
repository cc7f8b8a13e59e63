//! One memory budget for everything the core allocates per flow or group: Packrat rings and
//! indexes, PEMI buffers, multicast caches and quACK state. Engines are sized when they are
//! made, so the budget reserves each engine's cap (not its current use) and a flow that does not
//! fit is refused assistance — counted, and its packets still forwarded.

/// Bytes reserved against a limit.
#[derive(Debug)]
pub(super) struct MemoryBudget {
    limit: usize,
    reserved: usize,
    /// Engines refused (or Packrat caches shrunk) because the budget was spent.
    pub refused: u64,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            reserved: 0,
            refused: 0,
        }
    }

    /// Reserve `bytes` if they fit.
    pub fn try_reserve(&mut self, bytes: usize) -> bool {
        if bytes > self.available() {
            self.refused += 1;
            return false;
        }
        self.reserved += bytes;
        true
    }

    /// Whether `bytes` would fit.
    pub fn fits(&self, bytes: usize) -> bool {
        bytes <= self.available()
    }

    /// Take back a reservation that was just given back (an attach that did not happen).
    pub fn restore(&mut self, bytes: usize) {
        self.reserved += bytes;
    }

    /// Give back a reservation.
    pub fn release(&mut self, bytes: usize) {
        self.reserved = self.reserved.saturating_sub(bytes);
    }

    pub fn available(&self) -> usize {
        self.limit.saturating_sub(self.reserved)
    }

    pub fn reserved(&self) -> usize {
        self.reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_within_the_limit_and_counts_refusals() {
        let mut b = MemoryBudget::new(100);
        assert!(b.try_reserve(60));
        assert!(!b.try_reserve(41));
        assert!(b.try_reserve(40));
        assert_eq!(b.available(), 0);
        b.release(60);
        assert_eq!((b.reserved(), b.available(), b.refused), (40, 60, 1));
    }
}

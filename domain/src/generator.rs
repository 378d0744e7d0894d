//! A deterministic generator for the property tests: the same seed gives the same cases on every
//! machine, so a failing case can be replayed, and the crate needs no randomness dependency.

/// A xorshift generator.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> i64 {
        i64::try_from(self.next() % n).expect("small")
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

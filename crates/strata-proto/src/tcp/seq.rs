//! Sequence numbers: 32-bit values compared modulo 2³² (RFC 9293 §3.4). `a < b`
//! means `b` is ahead of `a` by less than half the number space, which is what
//! every window comparison of the RFC means.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, Sub};

/// A TCP sequence (or acknowledgment) number.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Seq(pub u32);

impl Seq {
    /// The later of two sequence numbers.
    pub fn max(self, other: Seq) -> Seq {
        if self < other { other } else { self }
    }

    /// The earlier of two sequence numbers.
    pub fn min(self, other: Seq) -> Seq {
        if self < other { self } else { other }
    }

    /// How far `self` is ahead of `earlier`, or zero when it is not ahead.
    pub fn since(self, earlier: Seq) -> u32 {
        let d = self - earlier;
        if d > 0 { d as u32 } else { 0 }
    }

    /// True when `lo <= self < hi`.
    pub fn within(self, lo: Seq, hi: Seq) -> bool {
        lo <= self && self < hi
    }
}

impl Add<u32> for Seq {
    type Output = Seq;
    fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }
}

impl Sub<u32> for Seq {
    type Output = Seq;
    fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }
}

/// The signed distance from `rhs` to `self`.
impl Sub<Seq> for Seq {
    type Output = i32;
    fn sub(self, rhs: Seq) -> i32 {
        self.0.wrapping_sub(rhs.0) as i32
    }
}

impl PartialOrd for Seq {
    fn partial_cmp(&self, other: &Seq) -> Option<Ordering> {
        Some((*self - *other).cmp(&0))
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_hold_across_the_wrap() {
        let a = Seq(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b.0, 9);
        assert!(a < b, "b is ahead");
        assert!(b > a, "and a behind");
        assert_eq!(b - a, 20);
        assert_eq!(a - b, -20);
        assert_eq!(b.since(a), 20);
        assert_eq!(a.since(b), 0);
        assert!((a + 5).within(a, b) && !b.within(a, b));
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
    }
}

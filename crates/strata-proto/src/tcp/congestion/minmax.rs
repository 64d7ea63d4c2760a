//! A windowed maximum (Kathleen Nichols' algorithm, as Linux's
//! `lib/minmax.c`): the largest sample of the last `window` time units,
//! kept in three samples — the best, and the best of the later second and
//! third parts of the window, which take over as older ones expire — so an
//! update costs O(1) without storing every sample.

/// A sample at a time (in whatever unit the window counts: BBR counts round
/// trips).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sample {
    t: u64,
    v: u64,
}

/// The maximum over a sliding window.
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowedMax {
    s: [Sample; 3],
}

impl WindowedMax {
    /// The current maximum.
    pub fn get(&self) -> u64 {
        self.s[0].v
    }

    /// Forgets everything but `v` at `t`.
    pub fn reset(&mut self, t: u64, v: u64) -> u64 {
        self.s = [Sample { t, v }; 3];
        v
    }

    /// Adds `v` measured at `t`; returns the maximum over `[t - window, t]`.
    pub fn update(&mut self, window: u64, t: u64, v: u64) -> u64 {
        let val = Sample { t, v };
        if v >= self.s[0].v || t.saturating_sub(self.s[2].t) > window {
            // A new maximum, or nothing in the window at all.
            return self.reset(t, v);
        }
        if v >= self.s[1].v {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].v {
            self.s[2] = val;
        }
        self.subwindow(window, val)
    }

    /// Lets the later samples take over as the best expires, and keeps them
    /// spread over the window.
    fn subwindow(&mut self, window: u64, val: Sample) -> u64 {
        let dt = val.t.saturating_sub(self.s[0].t);
        if dt > window {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if val.t.saturating_sub(self.s[0].t) > window {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].t == self.s[0].t && dt > window / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > window / 2 {
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_maximum_holds_for_the_window_then_gives_way_to_later_samples() {
        let mut m = WindowedMax::default();
        assert_eq!(m.update(10, 0, 100), 100);
        for t in 1..=10 {
            assert_eq!(
                m.update(10, t, 50 + t),
                100,
                "round {t}: still in the window"
            );
        }
        assert_eq!(
            m.update(10, 11, 40),
            60,
            "100 expired; the best since counts"
        );
        for t in 12..=30 {
            m.update(10, t, 40);
        }
        assert_eq!(m.get(), 40, "every higher sample has expired");
        assert_eq!(m.update(10, 31, 70), 70, "a new maximum at once");
    }
}

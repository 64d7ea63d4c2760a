//! Burst loss: the Gilbert–Elliott model, a two-state Markov chain stepped once per
//! frame. In the *good* state frames pass (random loss aside); in the *bad* state
//! each is lost with probability `loss`. Losses on real paths come in bursts — a
//! full queue, a fade — and protocols that survive 1% random loss can still fail
//! when the same 1% arrives four frames at a time.
//!
//! Parameterisation, per frame: `enter` = P(good→bad) (the literature's *p*),
//! `leave` = P(bad→good) (*r*), `loss` = P(lost | bad) (*1−h*; netem's `gemodel`
//! takes the same p, r, 1−h). A stay in the bad state lasts `1/leave` frames on
//! average, the chain spends `enter/(enter+leave)` of frames in it, and so the mean
//! loss rate is `loss·enter/(enter+leave)`.

use std::fmt;
use std::str::FromStr;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use strata_core::units::parse_fraction;

use strata_core::units::Fraction;

/// Gilbert–Elliott burst-loss parameters; written `"enter 1% leave 25% loss 100%"`
/// in a config (`loss` may be left out and is then 100%, the Gilbert model).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstLoss {
    /// Probability, per frame, that the good state turns bad.
    pub enter: f64,
    /// Probability, per frame, that the bad state turns good.
    pub leave: f64,
    /// Probability that a frame is lost while the state is bad.
    pub loss: f64,
}

impl BurstLoss {
    /// Mean length of a stay in the bad state, in frames.
    pub fn mean_burst(&self) -> f64 {
        1.0 / self.leave
    }

    /// The long-run fraction of frames lost.
    pub fn mean_loss(&self) -> f64 {
        let bad = self.enter + self.leave;
        if bad == 0.0 {
            0.0
        } else {
            self.loss * self.enter / bad
        }
    }
}

/// A burst-loss spec that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{text}' is not a burst-loss spec: {problem} (want \"enter 1% leave 25%\" or \"enter 1% leave 25% loss 50%\")"
)]
pub struct BadBurst {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub problem: String,
}

impl FromStr for BurstLoss {
    type Err = BadBurst;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |problem: String| BadBurst {
            text: s.into(),
            problem,
        };
        let (mut enter, mut leave, mut loss) = (None, None, None);
        let mut words = s.split_whitespace();
        while let Some(key) = words.next() {
            let value = words
                .next()
                .ok_or_else(|| bad(format!("'{key}' has no value")))?;
            let p = parse_fraction(value).map_err(|e| bad(e.to_string()))?;
            let slot = match key {
                "enter" => &mut enter,
                "leave" => &mut leave,
                "loss" => &mut loss,
                _ => return Err(bad(format!("unknown word '{key}'"))),
            };
            if slot.replace(p).is_some() {
                return Err(bad(format!("'{key}' given twice")));
            }
        }
        Ok(BurstLoss {
            enter: enter.ok_or_else(|| bad("'enter' is missing".into()))?,
            leave: leave.ok_or_else(|| bad("'leave' is missing".into()))?,
            loss: loss.unwrap_or(1.0),
        })
    }
}

impl fmt::Display for BurstLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "enter {} leave {} loss {}",
            Fraction(self.enter),
            Fraction(self.leave),
            Fraction(self.loss)
        )
    }
}

/// The chain's state as frames go by.
#[derive(Clone, Debug)]
pub(crate) struct BurstChain {
    params: BurstLoss,
    bad: bool,
}

impl BurstChain {
    /// A chain starting in the good state.
    pub fn new(params: BurstLoss) -> Self {
        BurstChain { params, bad: false }
    }

    /// Steps the chain for one frame and says whether the frame is lost.
    pub fn step(&mut self, rng: &mut ChaCha8Rng) -> bool {
        let turn = if self.bad {
            self.params.leave
        } else {
            self.params.enter
        };
        if rng.random::<f64>() < turn {
            self.bad = !self.bad;
        }
        self.bad && (self.params.loss >= 1.0 || rng.random::<f64>() < self.params.loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_spec_reads_with_or_without_its_loss() {
        let b: BurstLoss = "enter 1% leave 25%".parse().unwrap();
        assert_eq!((b.enter, b.leave, b.loss), (0.01, 0.25, 1.0));
        let b: BurstLoss = "leave 0.5 enter 2% loss 50%".parse().unwrap();
        assert_eq!((b.enter, b.leave, b.loss), (0.02, 0.5, 0.5));
        assert_eq!(b.to_string(), "enter 2% leave 50% loss 50%");
        assert_eq!(b.to_string().parse::<BurstLoss>().unwrap(), b);
    }

    #[test]
    fn malformed_burst_specs_are_refused() {
        for text in [
            "",
            "enter 1%",
            "enter 1% leave",
            "enter 1% leave 2% often 3%",
            "enter 1% leave 200%",
            "enter 1% enter 2% leave 3%",
        ] {
            assert!(text.parse::<BurstLoss>().is_err(), "{text:?} accepted");
        }
    }

    #[test]
    fn the_mean_loss_follows_the_stationary_distribution() {
        let b = BurstLoss {
            enter: 0.01,
            leave: 0.25,
            loss: 1.0,
        };
        assert!((b.mean_loss() - 0.01 / 0.26).abs() < 1e-12);
        assert_eq!(b.mean_burst(), 4.0);
    }
}

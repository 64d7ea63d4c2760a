//! What an emulated link does to the frames it carries, and how a link config
//! spells it.

use std::fmt;
use std::time::Duration;

use strata_core::GraphError;
use strata_core::graph::{OptionDoc, Options};

use super::burst::BurstLoss;
use strata_core::units::{Dur, Fraction, Rate, Size};

/// The queue of a rate-limited link when none is given: Linux's default
/// `txqueuelen` of 1000 full-size Ethernet frames.
pub const DEFAULT_QUEUE: u64 = 1_500_000;

/// The most frames one direction holds at once (queued or in flight) when no
/// `limit` is given: enough for 10 Gbit/s × 300 ms of full-size frames.
pub const DEFAULT_LIMIT: usize = 262_144;

/// The extra delay of a reordered frame when no `reorder_delay` is given.
pub const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(1);

/// The options of an emulated link, as a `[link.NAME]` table of kind "sim" takes
/// them.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "delay",
        doc: "one-way propagation delay, like \"50ms\" (default 0)",
    },
    OptionDoc {
        name: "jitter",
        doc: "each frame's delay varies uniformly within ±jitter, like \"1ms\"; frames stay in order (default 0)",
    },
    OptionDoc {
        name: "loss",
        doc: "probability that a frame is lost, independently of the others, like \"1%\" (default 0)",
    },
    OptionDoc {
        name: "burst",
        doc: "Gilbert–Elliott burst loss, \"enter P leave R [loss H]\": P = P(good→bad) and R = P(bad→good) per frame, H = loss probability in the bad state (default 100%); mean burst R⁻¹ frames",
    },
    OptionDoc {
        name: "ber",
        doc: "bit error rate: each bit is flipped independently with this probability, like \"1e-8\" (default 0)",
    },
    OptionDoc {
        name: "duplicate",
        doc: "probability that a frame arrives twice, like \"0.1%\" (default 0)",
    },
    OptionDoc {
        name: "reorder",
        doc: "probability that a frame is held back by reorder_delay so later frames overtake it, like \"1%\" (default 0)",
    },
    OptionDoc {
        name: "reorder_delay",
        doc: "how long a reordered frame is held back, like \"5ms\" (default 1ms)",
    },
    OptionDoc {
        name: "rate",
        doc: "bit rate, like \"100mbit\"; a frame takes 8·len/rate to serialise; 0 is unlimited (default 0)",
    },
    OptionDoc {
        name: "queue",
        doc: "bytes a rate-limited link may hold not yet serialised; a full queue drops new frames (default 1500KB)",
    },
    OptionDoc {
        name: "limit",
        doc: "most frames one direction holds at once, queued or in flight; more are dropped (default 262144)",
    },
];

/// One direction of an emulated link: what happens to every frame offered to it.
///
/// The default is an ideal link: no delay, no loss, unlimited rate.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkParams {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Each frame's delay is drawn uniformly from `delay ± jitter` (never below
    /// zero). Jitter never reorders frames: a frame that would overtake its
    /// predecessor is delivered together with it instead, as on a real path whose
    /// delay varies because its queues do. (Linux netem delays each packet
    /// independently, so its jitter reorders.) Frames closer together than the
    /// jitter's span therefore see delays skewed towards `delay + jitter`; frames
    /// further apart see the whole uniform range.
    pub jitter: Duration,
    /// Probability that a frame is lost, independently of every other frame.
    pub loss: f64,
    /// Burst loss, on top of `loss`.
    pub burst: Option<BurstLoss>,
    /// Bit error rate: every bit of a frame is flipped with this probability,
    /// independently.
    pub ber: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a frame is held back by `reorder_delay`, so frames sent
    /// after it overtake it. (netem instead sends the chosen packets *early*,
    /// without delay.)
    pub reorder: f64,
    /// How long a reordered frame is held back.
    pub reorder_delay: Duration,
    /// Bits per second; 0 is unlimited. A frame of `len` bytes occupies the link
    /// for `8·len / rate` seconds (the frame's own bytes; preamble, FCS and
    /// inter-frame gap are not counted, just as a capture does not show them).
    pub rate: u64,
    /// Bytes a rate-limited link holds that are not yet serialised, counting the
    /// rest of the frame on the wire. A frame that does not fit is dropped (tail
    /// drop); an idle link always takes a frame, however long.
    pub queue: u64,
    /// Most frames held at once, queued or in flight; more are dropped. Bounds the
    /// memory of a fast sender on a long link.
    pub limit: usize,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            burst: None,
            ber: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: DEFAULT_REORDER_DELAY,
            rate: 0,
            queue: DEFAULT_QUEUE,
            limit: DEFAULT_LIMIT,
        }
    }
}

impl LinkParams {
    /// An ideal link with only a propagation delay.
    pub fn delay(delay: Duration) -> Self {
        LinkParams {
            delay,
            ..Self::default()
        }
    }

    /// Reads a link config's options, refusing unknown ones and bad values.
    pub fn from_options(o: &Options) -> Result<LinkParams, GraphError> {
        let known: Vec<&str> = OPTIONS.iter().map(|d| d.name).collect();
        o.check_known(&known)?;
        let d = LinkParams::default();
        let limit = o.get::<usize>("limit")?.unwrap_or(d.limit);
        if limit == 0 {
            return Err(GraphError::BadOption {
                owner: o.owner().into(),
                option: "limit".into(),
                problem: "must be at least 1 frame".into(),
            });
        }
        Ok(LinkParams {
            delay: o.duration("delay")?.unwrap_or(d.delay),
            jitter: o.duration("jitter")?.unwrap_or(d.jitter),
            loss: o.fraction("loss")?.unwrap_or(d.loss),
            burst: o.get("burst")?,
            ber: o.fraction("ber")?.unwrap_or(d.ber),
            duplicate: o.fraction("duplicate")?.unwrap_or(d.duplicate),
            reorder: o.fraction("reorder")?.unwrap_or(d.reorder),
            reorder_delay: o.duration("reorder_delay")?.unwrap_or(d.reorder_delay),
            rate: o.rate("rate")?.unwrap_or(d.rate),
            queue: o.size("queue")?.unwrap_or(d.queue),
            limit,
        })
    }
}

/// Prints the settings that differ from an ideal link as the options of a config
/// table, `delay = "50ms", loss = "1%"`, or `ideal` when none do.
impl fmt::Display for LinkParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = LinkParams::default();
        let mut items: Vec<(&str, String)> = Vec::new();
        if self.delay != d.delay {
            items.push(("delay", Dur(self.delay).to_string()));
        }
        if self.jitter != d.jitter {
            items.push(("jitter", Dur(self.jitter).to_string()));
        }
        if self.loss != d.loss {
            items.push(("loss", Fraction(self.loss).to_string()));
        }
        if let Some(b) = &self.burst {
            items.push(("burst", b.to_string()));
        }
        if self.ber != d.ber {
            items.push(("ber", Fraction(self.ber).to_string()));
        }
        if self.duplicate != d.duplicate {
            items.push(("duplicate", Fraction(self.duplicate).to_string()));
        }
        if self.reorder != d.reorder {
            items.push(("reorder", Fraction(self.reorder).to_string()));
        }
        if self.reorder_delay != d.reorder_delay {
            items.push(("reorder_delay", Dur(self.reorder_delay).to_string()));
        }
        if self.rate != d.rate {
            items.push(("rate", Rate(self.rate).to_string()));
        }
        if self.queue != d.queue {
            items.push(("queue", Size(self.queue).to_string()));
        }
        if self.limit != d.limit {
            items.push(("limit", self.limit.to_string()));
        }
        if items.is_empty() {
            return f.write_str("ideal");
        }
        for (i, (key, value)) in items.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{key} = \"{value}\"")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::GraphConfig;

    fn options(body: &str) -> Options {
        let text = format!("[link.w]\nkind = \"sim\"\n{body}");
        GraphConfig::from_toml(&text).unwrap().links[0]
            .options
            .clone()
    }

    #[test]
    fn every_option_of_a_link_config_is_read() {
        let o = options(
            "delay = \"50ms\"\njitter = \"1ms\"\nloss = \"1%\"\n\
             burst = \"enter 1% leave 25% loss 50%\"\nber = \"1e-8\"\n\
             duplicate = \"0.1%\"\nreorder = \"1%\"\nreorder_delay = \"5ms\"\n\
             rate = \"100mbit\"\nqueue = \"256KB\"\nlimit = 1000",
        );
        let p = LinkParams::from_options(&o).unwrap();
        assert_eq!(p.delay, Duration::from_millis(50));
        assert_eq!(p.jitter, Duration::from_millis(1));
        assert_eq!(p.loss, 0.01);
        assert_eq!(
            p.burst,
            Some(BurstLoss {
                enter: 0.01,
                leave: 0.25,
                loss: 0.5
            })
        );
        assert_eq!(p.ber, 1e-8);
        assert_eq!(p.duplicate, 0.001);
        assert_eq!(p.reorder, 0.01);
        assert_eq!(p.reorder_delay, Duration::from_millis(5));
        assert_eq!(p.rate, 100_000_000);
        assert_eq!(p.queue, 256_000);
        assert_eq!(p.limit, 1000);
    }

    #[test]
    fn display_prints_the_options_back_in_config_syntax() {
        let body = "delay = \"50ms\", jitter = \"1ms\", loss = \"1%\", \
                    burst = \"enter 1% leave 25% loss 100%\", ber = \"1e-8\", \
                    duplicate = \"0.1%\", reorder = \"1%\", reorder_delay = \"5ms\", \
                    rate = \"100mbit\", queue = \"256KB\", limit = \"1000\"";
        let p = LinkParams::from_options(&options(&body.replace(", ", "\n"))).unwrap();
        assert_eq!(p.to_string(), body);
        assert_eq!(LinkParams::default().to_string(), "ideal");
    }

    #[test]
    fn unknown_options_and_bad_values_are_refused_naming_them() {
        let err = |body: &str| LinkParams::from_options(&options(body)).unwrap_err();
        assert!(err("dealy = \"5ms\"").to_string().contains("'dealy'"));
        assert!(err("loss = \"150%\"").to_string().contains("'loss'"));
        assert!(err("burst = \"enter 1%\"").to_string().contains("leave"));
        assert!(err("limit = 0").to_string().contains("'limit'"));
    }
}

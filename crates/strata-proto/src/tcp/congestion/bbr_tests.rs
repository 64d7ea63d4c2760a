use super::*;

const MSS: u32 = 1000;
const RTT: Duration = Duration::from_millis(100);

fn at(ms: u64) -> Instant {
    Instant::from_nanos(ms * 1_000_000)
}

/// Drives a `Bbr` one round trip at a time.
struct Path {
    bbr: Bbr,
    w: Window,
    delivered: u64,
    ms: u64,
}

impl Path {
    fn new() -> Path {
        Path {
            bbr: Bbr::default(),
            w: Window::initial(MSS),
            delivered: 0,
            ms: 0,
        }
    }

    /// One ACK ending a round trip that delivered at `bw` bytes/s, with
    /// `in_flight` bytes left in the network.
    fn round(&mut self, bw: u64, in_flight: u32) -> RateSample {
        self.ms += 101;
        let delivered = bw * RTT.as_millis() as u64 / 1000;
        let rs = RateSample {
            now: at(self.ms),
            delivered,
            interval: RTT,
            prior_delivered: self.delivered,
            total_delivered: self.delivered + delivered,
            app_limited: false,
            rtt: Some(RTT),
            acked: delivered.min(u64::from(u32::MAX)) as u32,
            losses: 0,
            prior_in_flight: in_flight,
            in_flight,
            recovering: false,
        };
        self.delivered += delivered;
        self.sample(rs);
        rs
    }

    fn sample(&mut self, rs: RateSample) {
        self.bbr.on_rate_sample(&mut self.w, &rs);
    }
}

#[test]
fn startup_doubles_until_three_rounds_grow_the_bandwidth_less_than_a_quarter() {
    let mut p = Path::new();
    for i in 0..6 {
        p.round(1_000_000 << i, 1_000_000);
        assert_eq!(p.bbr.mode(), Mode::Startup, "round {i}: still growing");
        assert_eq!(p.bbr.pacing_gain(), HIGH_GAIN);
    }
    p.round(32_000_000 * 6 / 5, 10_000_000);
    p.round(32_000_000 * 6 / 5, 10_000_000);
    assert_eq!(
        p.bbr.mode(),
        Mode::Startup,
        "two flat rounds are not enough"
    );
    p.round(32_000_000 * 6 / 5, 10_000_000);
    assert_eq!(
        p.bbr.mode(),
        Mode::Drain,
        "the third round without 25 % growth ends Startup"
    );
    assert_eq!(p.bbr.pacing_gain(), DRAIN_GAIN);
    assert_eq!(p.bbr.bandwidth(), 32_000_000 * 6 / 5);
    p.round(38_400_000, 3_000_000);
    assert_eq!(
        p.bbr.mode(),
        Mode::ProbeBw,
        "drained to one BDP (3.84 MB): probing"
    );
}

#[test]
fn probe_bw_cycles_the_eight_pacing_gains_one_min_rtt_each() {
    let mut p = Path::new();
    for _ in 0..5 {
        p.round(10_000_000, 100_000);
    }
    assert_eq!(
        p.bbr.mode(),
        Mode::ProbeBw,
        "flat from the start: drained at once"
    );
    assert_ne!(p.bbr.pacing_gain(), 750, "never starts draining");
    let bdp = 1_000_000;
    let mut gains = Vec::new();
    for _ in 0..16 {
        // Enough in flight for the probe to end, and little enough for the
        // drain phase to end, at the end of every phase.
        let in_flight = if p.bbr.pacing_gain() > UNIT {
            2 * bdp
        } else {
            bdp
        };
        p.round(10_000_000, in_flight);
        gains.push(p.bbr.pacing_gain());
    }
    let at = gains
        .iter()
        .position(|&g| g == 1250)
        .expect("a probing phase");
    assert_eq!(gains[at..at + 8], CYCLE, "{gains:?}");
    assert_eq!(
        p.w.cwnd,
        p.bbr.inflight(CWND_GAIN),
        "cwnd is twice the BDP plus quanta"
    );
    assert!(p.w.cwnd > 2 * bdp);
}

#[test]
fn a_min_rtt_ten_seconds_old_sends_the_flow_to_probe_rtt_for_200_ms_and_a_round() {
    let mut p = Path::new();
    for _ in 0..5 {
        p.round(10_000_000, 100_000);
    }
    let before = p.w.cwnd;
    // Later round trips are all longer: min_rtt is not refreshed.
    let mut rs = p.round(10_000_000, 1_000_000);
    for _ in 0..100 {
        rs.now += Duration::from_millis(101);
        rs.prior_delivered = rs.total_delivered;
        rs.total_delivered += 1_000_000;
        rs.rtt = Some(Duration::from_millis(120));
        p.sample(rs);
        if p.bbr.mode() == Mode::ProbeRtt {
            break;
        }
    }
    assert_eq!(p.bbr.mode(), Mode::ProbeRtt);
    assert_eq!(p.w.cwnd, 4 * MSS, "four segments in flight");
    rs.in_flight = 4 * MSS;
    for _ in 0..3 {
        rs.now += Duration::from_millis(101);
        rs.prior_delivered = rs.total_delivered;
        rs.total_delivered += 4 * u64::from(MSS);
        p.sample(rs);
    }
    assert_eq!(p.bbr.mode(), Mode::ProbeBw, "back after 200 ms and a round");
    assert!(p.w.cwnd > before, "with the window it left with");
    assert_eq!(
        p.w.cwnd,
        p.bbr.inflight(CWND_GAIN),
        "twice the BDP of the new min_rtt (120 ms), as far as it came back"
    );
}

#[test]
fn recovery_conserves_packets_for_a_round_then_restores_the_window() {
    let mut p = Path::new();
    for _ in 0..5 {
        p.round(10_000_000, 100_000);
    }
    let full = p.w.cwnd;
    p.bbr.ssthresh(&p.w, full, at(0));
    let mut rs = p.round(10_000_000, 500_000);
    rs.recovering = true;
    rs.acked = 10_000;
    rs.losses = 3_000;
    rs.in_flight = 500_000;
    p.sample(rs);
    assert_eq!(
        p.w.cwnd, 510_000,
        "what is in flight plus what was delivered"
    );
    rs.recovering = false;
    p.sample(rs);
    assert!(p.w.cwnd >= full, "restored when recovery ends");
    assert_eq!(p.w.cwnd, p.bbr.inflight(CWND_GAIN).max(full));
}

#[test]
fn pacing_follows_the_bandwidth_times_the_gain_less_one_percent() {
    let mut p = Path::new();
    assert_eq!(p.bbr.pacing_rate(), None, "unpaced until an ACK");
    p.round(10_000_000, 100_000);
    let first = p.bbr.pacing_rate().unwrap();
    assert_eq!(first, 10_000_000 * HIGH_GAIN / UNIT / 100 * 99);
}

//! The link emulator's contract, measured: configured rates come out within tight
//! statistical bounds, impairments do what their names say, and a seed fixes every
//! fate.

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use strata_core::{Instant, Message};
use strata_link::{BurstLoss, Emulator, Fate, LinkParams};

const MS: u64 = 1_000_000;

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * MS)
}

/// A 100-byte frame numbered `n` in its first four bytes.
fn frame(n: u32) -> Message {
    let mut b = vec![0u8; 100];
    b[..4].copy_from_slice(&n.to_be_bytes());
    Message::from(b)
}

fn number(m: &Message) -> u32 {
    let mut b = [0u8; 4];
    m.copy_to_slice(0, &mut b);
    u32::from_be_bytes(b)
}

/// Offers `n` frames, one every `gap`, and returns their fates.
fn offer_all(e: &mut Emulator, n: u32, gap: Duration) -> Vec<Fate> {
    (0..n)
        .map(|i| e.offer(Instant::ZERO + gap * i, frame(i)))
        .collect()
}

/// Every frame still held, with its delivery time, in delivery order.
fn drain(e: &mut Emulator) -> Vec<(Instant, Message)> {
    let mut out = Vec::new();
    while let Some(t) = e.next_delivery() {
        while let Some(m) = e.poll(t) {
            out.push((t, m));
        }
    }
    out
}

/// True when `count` lies within `sigmas` standard deviations of a binomial mean.
fn near_binomial(count: u64, n: u64, p: f64, sigmas: f64) -> bool {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (count as f64 - mean).abs() <= sigmas * sd
}

#[test]
fn random_loss_over_100k_frames_is_within_five_sigma_of_the_configured_rate() {
    for seed in [1, 2, 3] {
        let p = LinkParams {
            loss: 0.01,
            ..LinkParams::default()
        };
        let mut e = Emulator::new(p, seed);
        offer_all(&mut e, 100_000, Duration::ZERO);
        let s = e.stats().clone();
        assert!(
            near_binomial(s.lost_random, 100_000, 0.01, 5.0),
            "seed {seed}: lost {} of 100000",
            s.lost_random
        );
        assert_eq!(drain(&mut e).len() as u64 + s.lost_random, 100_000);
    }
}

/// Lengths of the runs of consecutive lost frames.
fn loss_runs(fates: &[Fate]) -> Vec<u64> {
    let mut runs = Vec::new();
    let mut run = 0;
    for f in fates {
        if matches!(f, Fate::LostBurst | Fate::LostRandom) {
            run += 1;
        } else if run > 0 {
            runs.push(run);
            run = 0;
        }
    }
    runs
}

#[test]
fn burst_loss_comes_in_bursts_of_mean_length_one_over_leave() {
    let burst = BurstLoss {
        enter: 0.01,
        leave: 0.25,
        loss: 1.0,
    };
    let mut e = Emulator::new(
        LinkParams {
            burst: Some(burst),
            ..LinkParams::default()
        },
        7,
    );
    let fates = offer_all(&mut e, 200_000, Duration::ZERO);
    let runs = loss_runs(&fates);
    let mean = runs.iter().sum::<u64>() as f64 / runs.len() as f64;
    // Geometric bursts: sd 3.5 frames each, ~1900 bursts, so the mean is ±0.08.
    assert!((mean - 4.0).abs() < 0.4, "mean burst {mean}");
    let rate = e.stats().lost_burst as f64 / 200_000.0;
    assert!((rate - burst.mean_loss()).abs() < 0.004, "loss rate {rate}");

    // The same mean rate lost at random comes one frame at a time.
    let mut random = Emulator::new(
        LinkParams {
            loss: burst.mean_loss(),
            ..LinkParams::default()
        },
        7,
    );
    let runs = loss_runs(&offer_all(&mut random, 200_000, Duration::ZERO));
    let mean = runs.iter().sum::<u64>() as f64 / runs.len() as f64;
    assert!(
        mean < 1.1,
        "random losses should not cluster, mean run {mean}"
    );
}

fn differing_bits(a: &[u8], b: &[u8]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x ^ y).count_ones() as u64)
        .sum()
}

#[test]
fn bit_errors_flip_bits_at_the_configured_rate_and_the_count_is_exact() {
    let ber = 1e-4;
    let mut e = Emulator::new(
        LinkParams {
            ber,
            ..LinkParams::default()
        },
        11,
    );
    let frames = 10_000u64;
    let mut flipped = 0;
    let mut corrupted = 0;
    for i in 0..frames {
        let original = vec![(i % 251) as u8; 1000];
        e.offer(Instant::ZERO, Message::from(original.clone()));
        let got = e.poll(Instant::ZERO).unwrap().to_vec();
        let d = differing_bits(&original, &got);
        flipped += d;
        corrupted += u64::from(d > 0);
    }
    let bits = frames * 8000;
    assert!(
        near_binomial(flipped, bits, ber, 5.0),
        "{flipped} bits flipped"
    );
    assert_eq!(e.stats().bits_flipped, flipped);
    assert_eq!(e.stats().corrupted, corrupted);
    let p_frame = 1.0 - (1.0 - ber).powi(8000);
    assert!(
        near_binomial(corrupted, frames, p_frame, 5.0),
        "{corrupted} frames"
    );
}

#[test]
fn bit_errors_change_an_unshared_frame_in_place_and_copy_a_shared_one() {
    let heavy = LinkParams {
        ber: 0.5,
        ..LinkParams::default()
    };
    let mut e = Emulator::new(heavy, 3);

    let unshared = Bytes::from(vec![0u8; 256]);
    let at = unshared.as_ptr();
    e.offer(Instant::ZERO, Message::from_bytes(unshared));
    let got = e.poll(Instant::ZERO).unwrap().into_bytes();
    assert_eq!(got.as_ptr(), at, "an unshared frame is changed in place");
    assert!(got.iter().any(|&b| b != 0), "and it was changed");

    let kept = Bytes::from(vec![0u8; 256]);
    e.offer(Instant::ZERO, Message::from_bytes(kept.clone()));
    let got = e.poll(Instant::ZERO).unwrap().into_bytes();
    assert!(got.iter().any(|&b| b != 0));
    assert!(
        kept.iter().all(|&b| b == 0),
        "the sender's copy is untouched"
    );

    let clean = LinkParams {
        ber: 1e-15,
        ..LinkParams::default()
    };
    let mut e = Emulator::new(clean, 3);
    e.offer(Instant::ZERO, Message::from_bytes(kept.clone()));
    let got = e.poll(Instant::ZERO).unwrap().into_bytes();
    assert_eq!(
        got.as_ptr(),
        kept.as_ptr(),
        "a frame without errors is not copied"
    );
}

#[test]
fn a_rate_limit_spaces_frames_by_their_serialisation_time() {
    // 100 bytes at 800 kbit/s take exactly 1 ms.
    let p = LinkParams {
        rate: 800_000,
        delay: Duration::from_millis(10),
        ..LinkParams::default()
    };
    let mut e = Emulator::new(p, 0);
    offer_all(&mut e, 5, Duration::ZERO);
    let times: Vec<Instant> = drain(&mut e).into_iter().map(|(t, _)| t).collect();
    assert_eq!(times, [ms(11), ms(12), ms(13), ms(14), ms(15)]);
    assert_eq!(e.stats().mean_delay(), Some(Duration::from_millis(13)));
}

#[test]
fn a_full_queue_tail_drops_and_counts_until_it_drains() {
    let p = LinkParams {
        rate: 800_000,
        queue: 500,
        ..LinkParams::default()
    };
    let mut e = Emulator::new(p, 0);
    let fates = offer_all(&mut e, 10, Duration::ZERO);
    let kept = fates
        .iter()
        .filter(|f| matches!(f, Fate::Delivered { .. }))
        .count();
    assert_eq!(kept, 5, "500 bytes of queue hold five 100-byte frames");
    assert!(fates[5..].iter().all(|f| *f == Fate::QueueFull));
    assert_eq!(e.stats().dropped_queue, 5);
    assert!(matches!(e.offer(ms(5), frame(10)), Fate::Delivered { .. }));

    // Offered at twice the rate for a second, the link still carries its rate.
    let p = LinkParams {
        rate: 800_000,
        queue: 5_000,
        ..LinkParams::default()
    };
    let mut e = Emulator::new(p, 0);
    offer_all(&mut e, 2000, Duration::from_micros(500));
    let delivered = drain(&mut e).len();
    assert!((1000..=1051).contains(&delivered), "{delivered} delivered");
}

/// Offers `n` frames `gap` apart and returns each one's delay, checking that they
/// arrive in order.
fn delays_in_order(e: &mut Emulator, n: u32, gap: Duration) -> Vec<Duration> {
    offer_all(e, n, gap);
    let got = drain(e);
    assert_eq!(got.len(), n as usize);
    got.iter()
        .enumerate()
        .map(|(i, (t, m))| {
            assert_eq!(number(m), i as u32, "frames must stay in order");
            *t - (Instant::ZERO + gap * i as u32)
        })
        .collect()
}

#[test]
fn delay_and_jitter_keep_deliveries_in_range_and_in_order() {
    let p = LinkParams {
        delay: Duration::from_millis(50),
        jitter: Duration::from_millis(10),
        ..LinkParams::default()
    };
    let range = Duration::from_millis(40)..=Duration::from_millis(60);
    // Frames 1 ms apart with ±10 ms of jitter would overtake each other on netem.
    let dense = delays_in_order(
        &mut Emulator::new(p.clone(), 5),
        10_000,
        Duration::from_millis(1),
    );
    assert!(dense.iter().all(|d| range.contains(d)), "{dense:?}");
    // Frames further apart than the jitter's span show its whole range.
    let sparse = delays_in_order(&mut Emulator::new(p, 5), 2_000, Duration::from_millis(25));
    assert!(sparse.iter().all(|d| range.contains(d)));
    let (lo, hi) = (sparse.iter().min().unwrap(), sparse.iter().max().unwrap());
    assert!(*lo < Duration::from_millis(41) && *hi > Duration::from_millis(59));
    let mean = sparse.iter().sum::<Duration>() / sparse.len() as u32;
    assert!(mean.abs_diff(Duration::from_millis(50)) < Duration::from_micros(700));
}

#[test]
fn reordering_lets_later_frames_overtake_held_ones() {
    let p = LinkParams {
        delay: Duration::from_millis(1),
        reorder: 0.1,
        reorder_delay: Duration::from_millis(5),
        ..LinkParams::default()
    };
    let mut e = Emulator::new(p, 9);
    let fates = offer_all(&mut e, 10_000, Duration::from_millis(1));
    let reordered = fates
        .iter()
        .filter(|f| {
            matches!(
                f,
                Fate::Delivered {
                    reordered: true,
                    ..
                }
            )
        })
        .count() as u64;
    assert_eq!(e.stats().reordered, reordered);
    assert!(
        near_binomial(reordered, 10_000, 0.1, 5.0),
        "{reordered} reordered"
    );
    let order: Vec<u32> = drain(&mut e).iter().map(|(_, m)| number(m)).collect();
    // A held frame arrives after frames sent up to 5 ms later: those overtook it.
    let overtaken = order
        .iter()
        .enumerate()
        .filter(|&(i, &n)| order[i + 1..].iter().any(|&later| later < n))
        .count() as u64;
    assert!(
        overtaken >= reordered * 9 / 10,
        "{overtaken} of {reordered}"
    );
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, (0..10_000).collect::<Vec<_>>(), "nothing lost");
}

#[test]
fn duplication_delivers_a_second_copy_right_behind_the_first() {
    let p = LinkParams {
        duplicate: 0.05,
        delay: Duration::from_millis(3),
        ..LinkParams::default()
    };
    let mut e = Emulator::new(p, 13);
    offer_all(&mut e, 20_000, Duration::from_millis(1));
    let got = drain(&mut e);
    let dups = e.stats().duplicated;
    assert!(near_binomial(dups, 20_000, 0.05, 5.0), "{dups} duplicated");
    assert_eq!(got.len() as u64, 20_000 + dups);
    let adjacent = got.windows(2).filter(|w| w[0].1 == w[1].1).count() as u64;
    assert_eq!(adjacent, dups);
}

#[test]
fn no_frame_is_delivered_before_its_time() {
    let mut e = Emulator::new(LinkParams::delay(Duration::from_millis(20)), 0);
    e.offer(ms(5), frame(1));
    assert_eq!(e.next_delivery(), Some(ms(25)));
    assert!(e.poll(ms(24)).is_none());
    assert_eq!(e.poll(ms(25)).map(|m| number(&m)), Some(1));
    assert!(e.poll(ms(99)).is_none());
}

#[test]
fn the_emulator_holds_at_most_limit_frames() {
    let p = LinkParams {
        delay: Duration::from_secs(1),
        limit: 3,
        ..LinkParams::default()
    };
    let mut e = Emulator::new(p, 0);
    let fates = offer_all(&mut e, 5, Duration::ZERO);
    assert_eq!(&fates[3..], [Fate::OverLimit, Fate::OverLimit]);
    assert_eq!((e.in_flight(), e.stats().dropped_limit), (3, 2));
}

fn everything() -> LinkParams {
    LinkParams {
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(2),
        loss: 0.05,
        burst: Some(BurstLoss {
            enter: 0.01,
            leave: 0.3,
            loss: 0.8,
        }),
        ber: 1e-4,
        duplicate: 0.02,
        reorder: 0.03,
        reorder_delay: Duration::from_millis(4),
        rate: 10_000_000,
        queue: 3_000,
        ..LinkParams::default()
    }
}

fn run_everything(seed: u64) -> (Vec<Fate>, Vec<(Instant, Message)>) {
    let mut e = Emulator::new(everything(), seed);
    let fates = offer_all(&mut e, 5_000, Duration::from_micros(50));
    (fates, drain(&mut e))
}

#[test]
fn a_seed_fixes_every_fate_and_another_seed_changes_them() {
    let (fates, frames) = run_everything(42);
    assert_eq!(run_everything(42), (fates.clone(), frames.clone()));
    let (other, _) = run_everything(43);
    assert_ne!(fates, other);
}

#[test]
fn changing_one_impairment_leaves_the_others_pattern_alone() {
    let lost = |params: LinkParams| -> Vec<bool> {
        let mut e = Emulator::new(params, 77);
        offer_all(&mut e, 2_000, Duration::from_millis(1))
            .iter()
            .map(|f| !matches!(f, Fate::Delivered { .. }))
            .collect()
    };
    let plain = LinkParams {
        loss: 0.1,
        ..LinkParams::default()
    };
    let jittery = LinkParams {
        jitter: Duration::from_millis(3),
        duplicate: 0.1,
        ber: 1e-3,
        ..plain.clone()
    };
    assert_eq!(lost(plain), lost(jittery));
}

#[test]
fn stats_print_every_count() {
    let mut e = Emulator::new(everything(), 1);
    offer_all(&mut e, 1_000, Duration::from_micros(100));
    drain(&mut e);
    let text = e.stats().to_string();
    for word in [
        "offered 1000",
        "delivered",
        "random",
        "burst",
        "queue",
        "corrupted",
        "duplicated",
        "reordered",
        "mean delay",
    ] {
        assert!(text.contains(word), "{word} missing from {text}");
    }
}

proptest! {
    /// Any frames under any settings: no panic, and every frame is accounted for.
    #[test]
    fn every_offered_frame_is_delivered_lost_or_dropped(
        lens in proptest::collection::vec(0usize..3000, 1..60),
        loss in 0.0..1.0f64,
        ber in 0.0..0.01f64,
        duplicate in 0.0..1.0f64,
        reorder in 0.0..1.0f64,
        rate in 0u64..100_000_000,
        queue in 0u64..20_000,
        jitter_us in 0u64..5_000,
        seed in any::<u64>(),
    ) {
        let p = LinkParams {
            delay: Duration::from_millis(1),
            jitter: Duration::from_micros(jitter_us),
            loss,
            ber,
            duplicate,
            reorder,
            rate,
            queue,
            ..LinkParams::default()
        };
        let mut e = Emulator::new(p, seed);
        for (i, len) in lens.iter().enumerate() {
            e.offer(Instant::from_nanos(i as u64 * 10_000), Message::from(vec![0xa5; *len]));
        }
        let delivered = drain(&mut e).len() as u64;
        let s = e.stats();
        prop_assert_eq!(s.offered, lens.len() as u64);
        prop_assert_eq!(delivered, s.delivered);
        prop_assert_eq!(s.delivered - s.duplicated + s.lost() + s.dropped(), s.offered);
    }
}

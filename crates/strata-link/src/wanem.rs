//! A WAN emulator bridge: two ports joined through an [`Emulator`] in each
//! direction, so anything on one side — kernel TCP, iperf3, a Strata host —
//! crosses the same emulated link the simulator gives Strata (seed 001's
//! delay/error generator, on real wires; this kernel has no netem).
//!
//! Each port is a [`Driver`]: AF_PACKET on an interface (the two veth ends of
//! a namespace between two hosts) or a TAP. Every frame read on one port is
//! offered to that direction's emulator, which decides its fate at once (lost,
//! dropped at the rate limiter's queue, or delivered later, perhaps corrupted);
//! due frames are written to the other port. Because packet sockets ignore
//! outgoing frames, what the bridge writes on a port is never read back.
//!
//! The bridge counts each fate per kind of frame (ARP, ICMP, UDP, TCP …), so a
//! test can account exactly for its own datagrams: sent = received + what the
//! bridge reports lost, dropped or failed for UDP.
//!
//! Timing: the loop sleeps in epoll until a port has frames or the next frame
//! is due, but spins through the last [`SPIN_BELOW`] before a due frame, since
//! epoll's timeouts have millisecond resolution and a 50 ms ± 1 ms link needs
//! better.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use strata_core::{Instant, Message};

use crate::drivers::{Driver, DriverCounts};
use crate::emulator::{Emulator, EmulatorStats, Fate, LinkParams};
use crate::offload;
use crate::runtime::{Capture, Clock, RuntimeError};

/// How close to a due frame the loop stops sleeping and spins.
pub const SPIN_BELOW: Duration = Duration::from_millis(2);

/// The longest the loop sleeps, so the stop and report flags are seen.
const MAX_WAIT: Duration = Duration::from_millis(50);

/// Most frames waiting to be written on one port; more are dropped and
/// counted (the port's device is slower than the emulated link lets through).
const OUT_LIMIT: usize = 8192;

/// The kinds of frame the bridge counts apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FrameClass {
    /// ARP (ethertype 0x0806).
    Arp,
    /// IPv4 carrying ICMP.
    Icmp,
    /// IPv4 carrying UDP (first fragments and whole datagrams).
    Udp,
    /// IPv4 carrying TCP.
    Tcp,
    /// Other IPv4, and non-first fragments (their header names no port).
    OtherIpv4,
    /// Anything else (IPv6, LLDP …).
    Other,
}

impl FrameClass {
    /// Every class, in report order.
    pub const ALL: [FrameClass; 6] = [
        FrameClass::Arp,
        FrameClass::Icmp,
        FrameClass::Udp,
        FrameClass::Tcp,
        FrameClass::OtherIpv4,
        FrameClass::Other,
    ];

    /// Classifies an Ethernet II frame by its ethertype and IPv4 protocol.
    pub fn of(frame: &[u8]) -> FrameClass {
        let ethertype = frame.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
        match ethertype {
            Some(0x0806) => FrameClass::Arp,
            Some(0x0800) => {
                let Some(ip) = frame.get(14..34) else {
                    return FrameClass::OtherIpv4;
                };
                // RFC 791: fragment offset in the low 13 bits of bytes 6–7.
                let offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
                match (ip[9], offset) {
                    (1, 0) => FrameClass::Icmp,
                    (17, 0) => FrameClass::Udp,
                    (6, 0) => FrameClass::Tcp,
                    _ => FrameClass::OtherIpv4,
                }
            }
            _ => FrameClass::Other,
        }
    }

    /// Classifies a frame held as a message (its headers may span chunks).
    pub fn of_message(frame: &Message) -> FrameClass {
        let mut head = [0u8; 34];
        let n = frame.copy_to_slice(0, &mut head);
        FrameClass::of(&head[..n])
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FrameClass::Arp => "arp",
            FrameClass::Icmp => "icmp",
            FrameClass::Udp => "udp",
            FrameClass::Tcp => "tcp",
            FrameClass::OtherIpv4 => "ipv4-other",
            FrameClass::Other => "other",
        }
    }
}

/// What became of one class of frames in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// Frames read from the input port.
    pub offered: u64,
    /// Lost on the emulated wire (random or burst loss).
    pub lost: u64,
    /// Dropped before the wire (the rate limiter's queue or the frame limit).
    pub dropped: u64,
    /// Delivered with bits flipped.
    pub corrupted: u64,
    /// Written to the output port.
    pub forwarded: u64,
    /// Due but not written: the output queue was full or the port refused it.
    pub failed: u64,
}

impl ClassCounts {
    /// Frames of this class the bridge did not pass on, for any reason.
    pub fn missing(&self) -> u64 {
        self.lost + self.dropped + self.failed
    }
}

/// One direction's report.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionReport {
    /// Input port.
    pub from: String,
    /// Output port.
    pub to: String,
    /// The emulator's own counts.
    pub emulator: EmulatorStats,
    /// Counts by class of frame.
    pub classes: Vec<(FrameClass, ClassCounts)>,
    /// Frames still held by the emulator or waiting for the output port.
    pub in_flight: u64,
}

impl DirectionReport {
    /// The counts of one class.
    pub fn class(&self, class: FrameClass) -> ClassCounts {
        self.classes
            .iter()
            .find(|(c, _)| *c == class)
            .map(|(_, n)| *n)
            .unwrap_or_default()
    }
}

impl fmt::Display for DirectionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} → {}: {}, in flight {}",
            self.from, self.to, self.emulator, self.in_flight
        )?;
        for (class, n) in &self.classes {
            if n.offered > 0 {
                writeln!(
                    f,
                    "  {:<10} offered {} forwarded {} lost {} dropped {} corrupted {} failed {}",
                    class.name(),
                    n.offered,
                    n.forwarded,
                    n.lost,
                    n.dropped,
                    n.corrupted,
                    n.failed
                )?;
            }
        }
        Ok(())
    }
}

/// What the bridge has done, both ways, with its ports' counters.
#[derive(Clone, Debug, PartialEq)]
pub struct WanemReport {
    /// Port 0 to port 1, then port 1 to port 0.
    pub directions: [DirectionReport; 2],
    /// The ports' driver counters.
    pub ports: [(String, DriverCounts); 2],
}

impl fmt::Display for WanemReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.directions {
            write!(f, "{d}")?;
        }
        for (name, counts) in &self.ports {
            writeln!(f, "port {name}: {counts}")?;
        }
        Ok(())
    }
}

/// One port of the bridge.
struct Port {
    driver: Box<dyn Driver>,
    name: String,
    out: VecDeque<Message>,
    readable: bool,
    writable: bool,
}

/// One direction: the emulator from a port to the other, and its counts.
struct Way {
    emulator: Emulator,
    classes: [ClassCounts; 6],
}

/// The bridge.
pub struct Wanem {
    ports: [Port; 2],
    ways: [Way; 2],
    poll: Poll,
    events: Events,
    clock: Clock,
    /// Every frame read on either port, before the emulator touches it.
    capture: Option<Capture>,
}

impl Wanem {
    /// A bridge between ports `a` and `b`; frames from `a` to `b` cross an
    /// emulator with `a_to_b`, the others one with `b_to_a`. Each direction
    /// draws from its own stream of `seed`.
    pub fn new(
        a: Box<dyn Driver>,
        b: Box<dyn Driver>,
        a_to_b: LinkParams,
        b_to_a: LinkParams,
        seed: u64,
    ) -> Result<Wanem, RuntimeError> {
        let poll = Poll::new().map_err(|e| RuntimeError::io("epoll", e))?;
        let port = |driver: Box<dyn Driver>, i: usize| -> Result<Port, RuntimeError> {
            let name = driver.describe();
            poll.registry()
                .register(
                    &mut SourceFd(&driver.fd()),
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| RuntimeError::io(format!("registering {name}"), e))?;
            Ok(Port {
                driver,
                name,
                out: VecDeque::new(),
                readable: true,
                writable: true,
            })
        };
        let ports = [port(a, 0)?, port(b, 1)?];
        let way = |params: LinkParams, stream: u64| Way {
            emulator: Emulator::new(params, seed.wrapping_mul(2).wrapping_add(stream)),
            classes: [ClassCounts::default(); 6],
        };
        Ok(Wanem {
            ports,
            ways: [way(a_to_b, 0), way(b_to_a, 1)],
            poll,
            events: Events::with_capacity(16),
            clock: Clock::start(),
            capture: None,
        })
    }

    /// Captures every frame read on either port, as it arrived (before loss,
    /// delay or bit errors), to a pcap file at `path`.
    pub fn capture(&mut self, path: &std::path::Path) -> Result<(), RuntimeError> {
        let capture = Capture::create(path).map_err(|source| RuntimeError::Capture {
            link: "wanem".into(),
            source,
        })?;
        self.capture = Some(capture);
        Ok(())
    }

    /// Flushes the capture; the first write error, if any.
    pub fn finish_capture(&mut self) -> Option<String> {
        let now = self.clock.now();
        let c = self.capture.as_mut()?;
        c.flush_if_due(now, true);
        c.error().map(str::to_string)
    }

    /// Runs until `stop` is set; whenever `report` is set, clears it and hands
    /// `reporter` the counts so far.
    pub fn run_until(
        &mut self,
        stop: &AtomicBool,
        report: &AtomicBool,
        mut reporter: impl FnMut(WanemReport),
    ) -> Result<(), RuntimeError> {
        while !stop.load(Ordering::Acquire) {
            if report.swap(false, Ordering::AcqRel) {
                reporter(self.report());
            }
            self.turn()?;
        }
        Ok(())
    }

    /// Runs for `duration`.
    pub fn run_for(&mut self, duration: Duration) -> Result<(), RuntimeError> {
        let end = self.clock.now() + duration;
        while self.clock.now() < end {
            self.turn()?;
        }
        Ok(())
    }

    /// What the bridge has done so far (the ports' kernel counters read anew).
    pub fn report(&mut self) -> WanemReport {
        for p in &mut self.ports {
            p.driver.refresh();
        }
        let direction = |i: usize| DirectionReport {
            from: self.ports[i].name.clone(),
            to: self.ports[1 - i].name.clone(),
            emulator: self.ways[i].emulator.stats().clone(),
            classes: FrameClass::ALL
                .iter()
                .map(|&c| (c, self.ways[i].classes[c as usize]))
                .collect(),
            in_flight: (self.ways[i].emulator.in_flight() + self.ports[1 - i].out.len()) as u64,
        };
        let port = |i: usize| {
            (
                self.ports[i].name.clone(),
                self.ports[i].driver.stats().snapshot(),
            )
        };
        WanemReport {
            directions: [direction(0), direction(1)],
            ports: [port(0), port(1)],
        }
    }

    fn turn(&mut self) -> Result<(), RuntimeError> {
        let mut busy = self.receive()?;
        let now = self.clock.now();
        for i in 0..2 {
            while let Some(frame) = self.ways[i].emulator.poll(now) {
                let class = FrameClass::of_message(&frame);
                let out = &mut self.ports[1 - i].out;
                if out.len() >= OUT_LIMIT {
                    self.ways[i].classes[class as usize].failed += 1;
                } else {
                    out.push_back(frame);
                }
                busy = true;
            }
        }
        for i in 0..2 {
            busy |= self.transmit(i)?;
        }
        if !busy {
            self.wait()?;
        }
        Ok(())
    }

    fn receive(&mut self) -> Result<bool, RuntimeError> {
        let mut any = false;
        for i in 0..2 {
            if !self.ports[i].readable {
                continue;
            }
            let now = self.clock.now();
            let way = &mut self.ways[i];
            let port = &mut self.ports[i];
            let (capture, clock) = (&mut self.capture, &self.clock);
            let n = port
                .driver
                .recv(&mut |frame, arrival| {
                    let mut m = frame.into_message();
                    m.set_segment_size(arrival.segment_size);
                    // A super-frame crosses the emulated wire as the frames
                    // it stands for, each with its own fate; the driver
                    // checked that it is TCP in IPv4, which can be cut.
                    for f in offload::segment(m).into_iter().flatten() {
                        if let Some(c) = capture.as_mut() {
                            c.message(clock, now, &f);
                        }
                        let class = FrameClass::of_message(&f);
                        let counts = &mut way.classes[class as usize];
                        counts.offered += 1;
                        match way.emulator.offer(now, f) {
                            Fate::LostRandom | Fate::LostBurst => counts.lost += 1,
                            Fate::QueueFull | Fate::OverLimit => counts.dropped += 1,
                            Fate::Delivered { bits_flipped, .. } => {
                                if bits_flipped > 0 {
                                    counts.corrupted += 1;
                                }
                            }
                        }
                    }
                })
                .map_err(|e| RuntimeError::io(format!("receiving on {}", port.name), e))?;
            port.readable = n > 0;
            any |= n > 0;
        }
        Ok(any)
    }

    /// Writes port `i`'s waiting frames; true when any left.
    fn transmit(&mut self, i: usize) -> Result<bool, RuntimeError> {
        let port = &mut self.ports[i];
        if !port.writable || port.out.is_empty() {
            return Ok(false);
        }
        let way = &mut self.ways[1 - i];
        let before = port.out.len();
        port.driver
            .send(&mut port.out, &mut |f, left| {
                let counts = &mut way.classes[FrameClass::of_message(&f) as usize];
                if left {
                    counts.forwarded += 1;
                } else {
                    counts.failed += 1;
                }
            })
            .map_err(|e| RuntimeError::io(format!("sending on {}", port.name), e))?;
        port.writable = port.out.is_empty();
        Ok(before != port.out.len())
    }

    fn wait(&mut self) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let next = self
            .ways
            .iter()
            .filter_map(|w| w.emulator.next_delivery())
            .min();
        let sleep = match next {
            Some(due) => {
                let left = Clock::until(now, due);
                if left < SPIN_BELOW {
                    // Close enough to spin: look at the ports without sleeping.
                    Duration::ZERO
                } else {
                    // mio rounds up to whole milliseconds; sleep short of the
                    // spin window so the rounding cannot make us late.
                    Duration::from_millis((left - SPIN_BELOW).as_millis() as u64).min(MAX_WAIT)
                }
            }
            None => MAX_WAIT,
        };
        if !sleep.is_zero() {
            for p in &mut self.ports {
                p.driver.refresh();
            }
        }
        if let Some(c) = self.capture.as_mut() {
            c.flush_if_due(now, !sleep.is_zero());
        }
        match self.poll.poll(&mut self.events, Some(sleep)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(RuntimeError::io("epoll wait", e)),
        }
        for event in self.events.iter() {
            if let Some(port) = self.ports.get_mut(event.token().0) {
                port.readable |= event.is_readable() || event.is_error() || event.is_read_closed();
                port.writable |= event.is_writable();
            }
        }
        Ok(())
    }

    /// Engine-style time since the bridge started.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::Driver;

    fn ipv4(protocol: u8, offset: u16) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[20..22].copy_from_slice(&offset.to_be_bytes());
        f[23] = protocol;
        f
    }

    #[test]
    fn frames_are_classified_by_ethertype_protocol_and_fragment() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(FrameClass::of(&arp), FrameClass::Arp);
        assert_eq!(FrameClass::of(&ipv4(17, 0)), FrameClass::Udp);
        assert_eq!(
            FrameClass::of(&ipv4(17, 0x2000)),
            FrameClass::Udp,
            "more-fragments set, offset 0"
        );
        assert_eq!(
            FrameClass::of(&ipv4(17, 185)),
            FrameClass::OtherIpv4,
            "a later fragment"
        );
        assert_eq!(FrameClass::of(&ipv4(1, 0)), FrameClass::Icmp);
        assert_eq!(FrameClass::of(&ipv4(6, 0)), FrameClass::Tcp);
        assert_eq!(
            FrameClass::of(&ipv4(6, 0)[..20]),
            FrameClass::OtherIpv4,
            "cut short"
        );
        assert_eq!(FrameClass::of(&[0u8; 5]), FrameClass::Other);
    }

    /// A UDP link from `local` to `peer` on loopback.
    fn udp(
        local: std::net::SocketAddr,
        peer: std::net::SocketAddr,
    ) -> crate::drivers::udp::UdpDriver {
        let c = crate::drivers::udp::UdpConfig {
            local,
            peer,
            mtu: 1500,
            buffer: 1 << 20,
            netns: None,
        };
        crate::drivers::udp::UdpDriver::with_config(&c, 32).unwrap()
    }

    fn free() -> std::net::SocketAddr {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    fn drain(d: &mut crate::drivers::udp::UdpDriver) -> usize {
        let mut n = 0;
        while d.recv(&mut |_, _| n += 1).unwrap() > 0 {}
        n
    }

    #[test]
    fn frames_cross_the_bridge_late_both_ways_and_every_loss_is_counted() {
        // End a ⇄ port 0 … port 1 ⇄ end b, all UDP links on loopback.
        let (ea, p0, p1, eb) = (free(), free(), free(), free());
        let (mut a, mut b) = (udp(ea, p0), udp(eb, p1));
        let delay = Duration::from_millis(20);
        let lossy = LinkParams {
            loss: 0.1,
            ..LinkParams::delay(delay)
        };
        let ports = (Box::new(udp(p0, ea)), Box::new(udp(p1, eb)));
        let mut w = Wanem::new(ports.0, ports.1, lossy, LinkParams::delay(delay), 42).unwrap();
        let mut to_b: VecDeque<Message> = (0..200).map(|_| Message::from(ipv4(17, 0))).collect();
        a.send(&mut to_b, &mut |_, _| {}).unwrap();
        let mut to_a: VecDeque<Message> = (0..10).map(|_| Message::from(ipv4(6, 0))).collect();
        b.send(&mut to_a, &mut |_, _| {}).unwrap();
        w.run_for(Duration::from_millis(5)).unwrap();
        assert_eq!(
            (drain(&mut a), drain(&mut b)),
            (0, 0),
            "nothing arrives before the delay"
        );
        w.run_for(Duration::from_millis(60)).unwrap();
        let (at_a, at_b) = (drain(&mut a), drain(&mut b));
        let r = w.report();
        let udp = r.directions[0].class(FrameClass::Udp);
        assert_eq!(udp.offered, 200);
        assert!(
            udp.lost > 5 && udp.lost < 40,
            "about 10% lost: {}",
            udp.lost
        );
        assert_eq!(at_b as u64, udp.offered - udp.lost, "{r}");
        assert_eq!((udp.forwarded, udp.failed), (at_b as u64, 0));
        assert_eq!(r.directions[1].class(FrameClass::Tcp).forwarded, 10);
        assert_eq!(at_a, 10);
        assert_eq!(r.directions[0].in_flight + r.directions[1].in_flight, 0);
        assert!(r.directions[0].emulator.mean_delay().unwrap() >= delay);
    }
}

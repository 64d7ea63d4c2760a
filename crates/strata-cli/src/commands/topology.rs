//! Namespaces and veth pairs for the real-link benchmarks (`strata bench
//! tcp-veth`, `tcp-wan`, `paper001 …`), removed when dropped — also on
//! error — and `strata wanem` between them.
//!
//! Namespace `a` (198.18.X.1) and `b` (198.18.X.2) share one veth pair, or,
//! for a WAN, each has a veth pair to a third namespace `w`, where `strata
//! wanem` bridges the two ends.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant as Wall};

use signal_hook::consts::{SIGINT, SIGTERM};

use anyhow::{Context, Result, bail};

/// What a topology's namespaces and veth ends are like.
#[derive(Clone, Copy)]
pub struct Veths {
    /// Start of the namespaces' names (the process id follows, so two
    /// benchmarks never share one).
    pub prefix: &'static str,
    /// The third octet of the subnet, 198.18.X.0/24.
    pub net: u8,
    /// A third namespace between the two ends, for `strata wanem`.
    pub wan: bool,
    /// The kernel's default device offloads (else all off).
    pub offloads: bool,
    /// The congestion control of namespace `a`'s routes to `b` (else the
    /// namespace's default, inherited from the host).
    pub congctl: Option<&'static str>,
    /// Hosts of `b` (besides .2) `a` gets a route to.
    pub extra_hosts: &'static [u8],
}

/// Namespaces `a`, `b` (and `w` for a WAN).
pub struct Topology {
    name: String,
    net: u8,
}

/// `ip` with the words of `line` (names and addresses hold no spaces).
pub fn ip(line: &str) -> Result<String> {
    run("ip", &line.split(' ').collect::<Vec<_>>())
}

/// Runs `program` to its end; its output, or an error with its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Namespaces of this process's live topologies, for the signal handler.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// On SIGINT or SIGTERM (a benchmark interrupted), the live topologies'
/// namespaces go too — with every process in them (wanem, peer programs,
/// all started by this benchmark) — before the process exits; `Drop` never
/// runs when a signal ends a process.
fn clean_up_on_signals() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
            return;
        };
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let names = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
                for ns in names {
                    remove_namespace(&ns);
                }
                std::process::exit(128 + signal);
            }
        });
    });
}

/// Kills the processes in namespace `ns` — but this one, whose thread may
/// be in it — then removes it.
fn remove_namespace(ns: &str) {
    let me = std::process::id().to_string();
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if pid != me {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
    }
    let _ = Command::new("ip").args(["netns", "del", ns]).output();
}

impl Topology {
    /// Makes the namespaces and veth pairs (needs root).
    pub fn up(veths: Veths) -> Result<Topology> {
        let wan = veths.wan;
        let t = Topology {
            name: format!("{}{}", veths.prefix, std::process::id() % 100_000),
            net: veths.net,
        };
        t.down();
        clean_up_on_signals();
        if let Ok(mut live) = LIVE.lock() {
            live.extend(["a", "b", "w"].map(|side| t.ns(side)));
        }
        let mut sides = vec!["a", "b"];
        if wan {
            sides.push("w");
        }
        for side in &sides {
            let ns = t.ns(side);
            ip(&format!("netns add {ns}"))?;
            t.exec(
                side,
                "sysctl",
                &[
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
            ip(&format!("-n {ns} link set lo up"))?;
        }
        let (a, b, w) = (t.ns("a"), t.ns("b"), t.ns("w"));
        let (va, vb, wa, wb) = (t.dev("va"), t.dev("vb"), t.dev("wa"), t.dev("wb"));
        let mut ends = vec![("a", va.clone()), ("b", vb.clone())];
        if wan {
            ip(&format!(
                "link add {va} netns {a} type veth peer name {wa} netns {w}"
            ))?;
            ip(&format!(
                "link add {wb} netns {w} type veth peer name {vb} netns {b}"
            ))?;
            ends.push(("w", wa));
            ends.push(("w", wb));
        } else {
            ip(&format!(
                "link add {va} netns {a} type veth peer name {vb} netns {b}"
            ))?;
        }
        for (side, dev) in &ends {
            if !veths.offloads {
                let off = format!("-K {dev} tx off sg off tso off gso off gro off");
                t.exec(side, "ethtool", &off.split(' ').collect::<Vec<_>>())?;
            }
            ip(&format!("-n {} link set {dev} up", t.ns(side)))?;
        }
        ip(&format!("-n {a} addr add {}/24 dev {va}", t.ip(1)))?;
        ip(&format!("-n {b} addr add {}/24 dev {vb}", t.ip(2)))?;
        // A namespace inherits the host's default congestion control (which
        // may be BBR) and may only change it to an algorithm the host allows
        // unprivileged users; a route's `congctl` has no such limit and
        // changes nothing outside the namespace.
        if let Some(cc) = veths.congctl {
            for host in std::iter::once(&2).chain(veths.extra_hosts) {
                let to = t.ip(*host);
                ip(&format!("-n {a} route add {to}/32 dev {va} congctl {cc}"))?;
            }
        }
        Ok(t)
    }

    /// The name of namespace `side`.
    pub fn ns(&self, side: &str) -> String {
        format!("{}-{side}", self.name)
    }

    /// The name of veth end `dev` ("va", "vb", "wa", "wb").
    pub fn dev(&self, dev: &str) -> String {
        format!("{}-{dev}", self.name)
    }

    /// 198.18.X.`host`.
    pub fn ip(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.net, host)
    }

    /// Runs `program` in namespace `side` to its end.
    pub fn exec(&self, side: &str, program: &str, args: &[&str]) -> Result<String> {
        let ns = self.ns(side);
        let mut all = vec!["netns", "exec", ns.as_str(), program];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// The congestion control of namespace `a`'s connection to
    /// 198.18.X.`to`, as `ss -ti` reports it while the connection runs.
    pub fn kernel_cc(&self, to: u8) -> Result<String> {
        let out = self.exec("a", "ss", &["-tin", "dst", &self.ip(to).to_string()])?;
        Ok(["cubic", "bbr", "reno"]
            .into_iter()
            .find(|cc| out.split_whitespace().any(|w| w == *cc))
            .unwrap_or("unknown")
            .to_string())
    }

    /// Namespace `a`'s default congestion control.
    pub fn default_cc(&self) -> Result<String> {
        Ok(self
            .exec("a", "cat", &["/proc/sys/net/ipv4/tcp_congestion_control"])?
            .trim()
            .to_string())
    }

    fn down(&self) {
        let names = ["a", "b", "w"].map(|side| self.ns(side));
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|n| !names.contains(n));
        }
        for ns in names {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.down();
    }
}

/// `strata wanem` bridging namespace `w`'s two veth ends, stopped on drop.
pub struct Wanem {
    child: Child,
}

impl Wanem {
    /// Starts it with emulator options such as `["--delay", "50ms"]` and
    /// waits until it is ready.
    pub fn start(t: &Topology, options: &[&str]) -> Result<Wanem> {
        let exe = std::env::current_exe().context("finding the strata binary")?;
        let exe = exe.to_string_lossy().into_owned();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &t.ns("w"), &exe, "wanem", "--between"])
            .args([t.dev("wa"), t.dev("wb")])
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting strata wanem")?;
        let out = child.stdout.take().context("wanem's output")?;
        let mut lines = BufReader::new(out).lines();
        let mut wanem = Wanem { child };
        loop {
            match lines.next() {
                Some(Ok(l)) if l.trim() == "ready" => break,
                Some(Ok(_)) => {}
                _ => {
                    let status = wanem.child.wait()?;
                    bail!("strata wanem ended before it was ready ({status})");
                }
            }
        }
        // Keep reading so wanem never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(wanem)
    }
}

impl Drop for Wanem {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "INT", &self.child.id().to_string()])
            .status();
        let deadline = Wall::now() + Duration::from_secs(5);
        while Wall::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! `strata host`: a Strata host on a real link, serving until interrupted.
//!
//! The host arguments ([`HostArgs`]) and the reports are shared with the
//! client commands (`strata ping`, `strata udp-send`), which run the same kind
//! of host for as long as their exchange lasts.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Context, Result, anyhow, bail};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;
use strata::apps::http::HttpServer;
use strata::apps::tcp_discard::TcpDiscard;
use strata::apps::tcp_echo::TcpEcho;
use strata::apps::udp_discard::UdpDiscard;
use strata::apps::udp_echo::UdpEcho;
use strata::apps::udp_sink::UdpSink;
use strata::link::runtime::{RuntimeConfig, RuntimeThread};
use strata::link::{PollMode, Runtime};
use strata::proto::tcp::congestion::Algorithm;
use strata::{AppId, Arch, Engine, GraphConfig, HostBuilder, HostParams, HwAddr, Ipv4Cidr};

/// Where a host's frames go, as the short form names it: the kind, its
/// device, and any of the kind's options after it as `,KEY=VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkArg {
    kind: &'static str,
    options: Vec<(String, String)>,
}

impl FromStr for LinkArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("'{s}': want tap:NAME, packet:IFACE or udp:LOCAL,PEER"))?;
        // Options follow the device, each `,KEY=VALUE`.
        let mut extra = Vec::new();
        let mut rest = rest;
        while let Some((head, last)) = rest.rsplit_once(',') {
            let Some((key, value)) = last.split_once('=') else {
                break;
            };
            extra.push((key.to_string(), value.to_string()));
            rest = head;
        }
        extra.reverse();
        let options = match kind {
            "tap" => vec![("name", rest.to_string())],
            "packet" => vec![("interface", rest.to_string())],
            "udp" => {
                let (local, peer) = rest.split_once(',').ok_or_else(|| {
                    format!("'{s}': a udp link is udp:LOCAL_ADDR:PORT,PEER_ADDR:PORT")
                })?;
                vec![("local", local.to_string()), ("peer", peer.to_string())]
            }
            other => {
                return Err(format!(
                    "unknown link kind '{other}' (want tap, packet or udp)"
                ));
            }
        };
        let kind = match kind {
            "tap" => "tap",
            "packet" => "packet",
            _ => "udp",
        };
        let options = options
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .chain(extra)
            .collect();
        Ok(LinkArg { kind, options })
    }
}

/// Who a host is and what it runs on.
#[derive(clap::Args, Debug)]
pub struct HostArgs {
    /// A graph config in TOML instead of the short form; its links must be of
    /// kind tap, packet or udp.
    #[arg(long, conflicts_with_all = ["link", "ip", "gw", "mac", "stack", "congestion"])]
    config: Option<PathBuf>,
    /// The link: tap:NAME (a TAP device, created if missing), packet:IFACE
    /// (AF_PACKET on an interface) or udp:LOCAL,PEER (frames in UDP datagrams,
    /// e.g. udp:127.0.0.1:9000,127.0.0.1:9001), then any of the kind's
    /// options as ,KEY=VALUE (tap:st0,vnet=false or packet:veth0,offload=false:
    /// see README.md's "Real links").
    #[arg(long, required_unless_present = "config")]
    link: Option<LinkArg>,
    /// This host's address and prefix, e.g. 198.18.1.2/24.
    #[arg(long, required_unless_present = "config")]
    ip: Option<Ipv4Cidr>,
    /// Default gateway.
    #[arg(long)]
    gw: Option<Ipv4Addr>,
    /// Hardware address (default 02:53:54 and the address's last three bytes).
    #[arg(long)]
    mac: Option<HwAddr>,
    /// The stack, top first.
    #[arg(long, default_value = "udp+tcp/ip/eth")]
    stack: String,
    /// Capture every frame of the link, both ways, to this pcap file (with
    /// several links, one file each: NAME-LINK.pcap).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Spin instead of sleeping: lowest latency, one core busy.
    #[arg(long)]
    busy_poll: bool,
    /// Dispatch architecture.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// TCP congestion control: cubic (the default), reno, or bbr (paced;
    /// keeps a lossy long path full).
    #[arg(long, value_parser = congestion)]
    congestion: Option<String>,
}

/// A congestion control algorithm's name, checked.
fn congestion(s: &str) -> Result<String, String> {
    s.parse::<Algorithm>().map(|_| s.to_owned())
}

/// The MAC a host gets when none is given: locally administered, 02:53:54
/// ("ST") and the low three bytes of its address, so hosts on one subnet differ.
pub fn default_mac(ip: Ipv4Addr) -> HwAddr {
    let o = ip.octets();
    HwAddr([0x02, 0x53, 0x54, o[1], o[2], o[3]])
}

impl HostArgs {
    /// This host's address, when the short form gave one.
    pub fn address(&self) -> Option<Ipv4Cidr> {
        self.ip
    }

    /// The default gateway, when given.
    pub fn gateway(&self) -> Option<Ipv4Addr> {
        self.gw
    }

    /// The short form for a command that picks its stack itself (`strata
    /// xsend --link`): one link, an address, no config file.
    pub fn short(
        link: LinkArg,
        ip: Ipv4Cidr,
        gw: Option<Ipv4Addr>,
        mac: Option<HwAddr>,
        stack: &str,
        pcap: Option<PathBuf>,
        busy_poll: bool,
    ) -> HostArgs {
        HostArgs {
            config: None,
            link: Some(link),
            ip: Some(ip),
            gw,
            mac,
            stack: stack.to_string(),
            pcap,
            busy_poll,
            arch: Arch::Llm,
            congestion: None,
        }
    }

    /// Builds the host's engine.
    pub fn engine(&self) -> Result<Engine> {
        Ok(self.builder()?.build()?)
    }

    /// The host's builder, for a command to add its protocols' options.
    pub fn builder(&self) -> Result<HostBuilder> {
        let builder = match (&self.config, &self.link, self.ip) {
            (Some(path), _, _) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                HostBuilder::config(GraphConfig::from_toml(&text)?, HostParams::numbered(1))
            }
            (None, Some(link), Some(ip)) => {
                let params = HostParams {
                    mac: self.mac.unwrap_or_else(|| default_mac(ip.address())),
                    address: ip,
                    gateway: self.gw,
                };
                let mut b = HostBuilder::spec(&self.stack, params, "net0", link.kind);
                for (key, value) in &link.options {
                    b = match value.parse::<bool>() {
                        Ok(flag) => b.link_option(key, flag),
                        Err(_) => b.link_option(key, value.as_str()),
                    };
                }
                if let Some(name) = &self.congestion {
                    // Whichever TCP the stack has (smoltcp's has no BBR, and
                    // says so when asked for it).
                    for tcp in ["tcp", "smoltcp-tcp"] {
                        b = b.option(tcp, "congestion", name.as_str());
                    }
                }
                b
            }
            _ => bail!("give --config, or --link and --ip"),
        };
        Ok(builder.arch(self.arch))
    }

    /// Opens the links of `engine`, starts the captures, and runs it on a thread.
    pub fn start(&self, engine: Engine) -> Result<RuntimeThread> {
        let config = RuntimeConfig {
            mode: if self.busy_poll {
                PollMode::BusyPoll
            } else {
                PollMode::Blocking
            },
            ..RuntimeConfig::default()
        };
        let links: Vec<String> = engine.links().iter().map(|l| l.name.clone()).collect();
        let mut runtime = Runtime::new(engine, config)?;
        if let Some(path) = &self.pcap {
            for link in &links {
                let file = if links.len() == 1 {
                    path.clone()
                } else {
                    per_link(path, link)
                };
                runtime.capture(link, &file)?;
            }
        }
        Ok(runtime.spawn("strata-host")?)
    }
}

fn per_link(path: &Path, link: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("capture");
    path.with_file_name(format!("{stem}-{link}.pcap"))
}

/// A service `--serve` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Service {
    /// ICMP echo (always answered by the stack's icmp; named for clarity).
    Icmp,
    /// UDP echo (RFC 862) on a port.
    UdpEcho(u16),
    /// UDP discard (RFC 863) on a port.
    UdpDiscard(u16),
    /// A transfer sink on a port for a run id.
    UdpSink(u16, u32),
    /// TCP echo (RFC 862) on a port.
    TcpEcho(u16),
    /// TCP discard (RFC 863) on a port.
    TcpDiscard(u16),
    /// A static HTTP/1.1 server of a folder's files on a port.
    Http(u16, PathBuf),
}

impl FromStr for Service {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // A folder may contain ':', so the http form is split in three at most.
        let mut parts = s.splitn(
            if s.starts_with("http:") {
                3
            } else {
                usize::MAX
            },
            ':',
        );
        let name = parts.next().unwrap_or_default();
        let mut number = |what: &str| -> Result<u32, String> {
            parts
                .next()
                .ok_or_else(|| format!("'{s}': {name} needs a {what}"))?
                .parse()
                .map_err(|_| format!("'{s}': bad {what}"))
        };
        let port = |n: u32| {
            u16::try_from(n)
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("'{s}': bad port"))
        };
        let service = match name {
            "icmp" => Service::Icmp,
            "udp-echo" => Service::UdpEcho(port(number("port")?)?),
            "udp-discard" => Service::UdpDiscard(port(number("port")?)?),
            "udp-sink" => {
                let p = port(number("port")?)?;
                Service::UdpSink(p, number("run id")?)
            }
            "tcp-echo" => Service::TcpEcho(port(number("port")?)?),
            "tcp-discard" => Service::TcpDiscard(port(number("port")?)?),
            "http" => {
                let p = port(number("port")?)?;
                let dir = parts
                    .next()
                    .filter(|d| !d.is_empty())
                    .ok_or_else(|| format!("'{s}': http needs a folder, http:PORT:DIR"))?;
                Service::Http(p, PathBuf::from(dir))
            }
            other => {
                return Err(format!(
                    "unknown service '{other}' (want icmp, udp-echo:PORT, udp-discard:PORT, \
                     udp-sink:PORT:RUN, tcp-echo:PORT, tcp-discard:PORT, http:PORT:DIR)"
                ));
            }
        };
        if parts.next().is_some() {
            return Err(format!("'{s}': too many parts"));
        }
        Ok(service)
    }
}

/// Run a Strata host on a real link until interrupted.
///
/// SIGUSR1 prints every protocol's counters, the links' counters and the
/// services'; SIGINT or SIGTERM prints them and exits. "ready" is printed once
/// the link is open.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    host: HostArgs,
    /// Services, comma-separated: icmp, udp-echo:PORT, udp-discard:PORT,
    /// udp-sink:PORT:RUN (checks a `strata udp-send --bytes` transfer),
    /// tcp-echo:PORT, tcp-discard:PORT, http:PORT:DIR (GET and HEAD of the
    /// files under DIR, one request per connection). TCP services need a TCP
    /// in the stack: tcp, as the default stack has, or smoltcp-tcp.
    #[arg(long, value_delimiter = ',')]
    serve: Vec<Service>,
}

/// Runs `strata host`.
pub fn run(args: Args) -> Result<()> {
    let mut engine = args.host.engine()?;
    let mut installed = Vec::new();
    for service in &args.serve {
        let id = match service {
            Service::Icmp => None,
            Service::UdpEcho(port) => Some(UdpEcho::install(&mut engine, *port)?),
            Service::UdpDiscard(port) => Some(UdpDiscard::install(&mut engine, *port)?),
            Service::UdpSink(port, run) => Some(UdpSink::install(&mut engine, *port, *run)?),
            Service::TcpEcho(port) => Some(TcpEcho::install(&mut engine, *port)?),
            Service::TcpDiscard(port) => Some(TcpDiscard::install(&mut engine, *port)?),
            Service::Http(port, dir) => Some(
                HttpServer::install(&mut engine, *port, dir.clone())
                    .with_context(|| format!("serving {}", dir.display()))?,
            ),
        };
        if let Some(id) = id {
            installed.push((service.clone(), id));
        }
    }
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGUSR1])?;
    let thread = args.host.start(engine)?;
    let started = WallInstant::now();
    println!("ready");
    'serve: while thread.is_running() {
        for signal in signals.pending() {
            let text = report(&thread, &installed, started)?;
            print!("{text}");
            if signal != SIGUSR1 {
                break 'serve;
            }
        }
        // Polled rather than waited for, so that a runtime stopping on an
        // error ends the host too; 20 ms bounds how late a report comes.
        std::thread::sleep(Duration::from_millis(20));
    }
    // A runtime that stopped by itself gives its error here.
    let runtime = thread.stop()?;
    for c in runtime.captures() {
        match c.error {
            Some(e) => eprintln!("strata: capture {}: {e}", c.path.display()),
            None => println!("capture {} frames={}", c.path.display(), c.frames),
        }
    }
    Ok(())
}

/// Every protocol's counters, the engine's, the links' (engine and driver
/// side) and the services', one line each.
pub fn report(
    thread: &RuntimeThread,
    services: &[(Service, AppId)],
    started: WallInstant,
) -> Result<String> {
    let services = services.to_vec();
    let body = thread
        .handle()
        .call(move |engine| engine_report(engine, &services))
        .map_err(|_| anyhow!("the host's engine has stopped"))?;
    let mut out = format!(
        "== report after {:.3} s ==\n",
        started.elapsed().as_secs_f64()
    );
    out.push_str(&body);
    for link in thread.monitor().snapshot() {
        let _ = writeln!(out, "driver {link}");
    }
    Ok(out)
}

fn engine_report(engine: &Engine, services: &[(Service, AppId)]) -> String {
    let mut out = String::new();
    for (node, (name, counters)) in engine.nodes().iter().zip(engine.all_counters()) {
        let _ = writeln!(out, "proto {name} ({}): {counters}", node.kind);
    }
    let _ = writeln!(out, "engine: {}", engine.engine_counters());
    for (i, link) in engine.links().iter().enumerate() {
        let s = engine.link_stats(strata::LinkId(i as u16));
        let _ = writeln!(
            out,
            "link {}: rx_frames={} rx_bytes={} rx_dropped={} tx_frames={} tx_bytes={} tx_dropped={}",
            link.name, s.rx_frames, s.rx_bytes, s.rx_dropped, s.tx_frames, s.tx_bytes, s.tx_dropped
        );
    }
    for (service, id) in services {
        let id = *id;
        let line = match service {
            Service::Icmp => continue,
            Service::UdpEcho(port) => engine
                .app::<UdpEcho>(id)
                .map(|a| format!("udp-echo port={port} echoed={} bytes={}", a.echoed, a.bytes)),
            Service::UdpDiscard(port) => engine
                .app::<UdpDiscard>(id)
                .map(|a| format!("udp-discard port={port} datagrams={} bytes={}", a.datagrams, a.bytes)),
            Service::UdpSink(port, run) => engine.app::<UdpSink>(id).map(|a| {
                let c = &a.counts;
                format!(
                    "udp-sink port={port} run={run} intact={} intact_bytes={} corrupt={} duplicates={} \
                     reordered={} foreign={} digest={:#018x}",
                    c.intact, c.intact_bytes, c.corrupt, c.duplicates, c.reordered, c.foreign, c.digest
                )
            }),
            Service::TcpEcho(port) => engine.app::<TcpEcho>(id).map(|a| {
                format!("tcp-echo port={port} connections={} bytes={}", a.connections, a.bytes)
            }),
            Service::TcpDiscard(port) => engine.app::<TcpDiscard>(id).map(|a| {
                format!("tcp-discard port={port} connections={} bytes={}", a.connections, a.bytes)
            }),
            Service::Http(port, _) => engine.app::<HttpServer>(id).map(|a| {
                let h = a.stats;
                format!(
                    "http port={port} connections={} ok={} errors={} body_bytes={} aborted={}",
                    h.connections, h.ok, h.errors, h.body_bytes, h.aborted
                )
            }),
        };
        if let Some(line) = line {
            let _ = writeln!(out, "app {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_link_forms_name_their_kind_and_options() {
        let l: LinkArg = "udp:127.0.0.1:9000,127.0.0.1:9001".parse().unwrap();
        assert_eq!(l.kind, "udp");
        assert_eq!(
            l.options,
            [
                ("local".into(), "127.0.0.1:9000".into()),
                ("peer".into(), "127.0.0.1:9001".into())
            ]
        );
        assert_eq!(
            "tap:st0".parse::<LinkArg>().unwrap().options,
            [("name".into(), "st0".into())]
        );
        assert_eq!(
            "tap:st0,vnet=false".parse::<LinkArg>().unwrap().options,
            [
                ("name".into(), "st0".into()),
                ("vnet".into(), "false".into())
            ]
        );
        let l: LinkArg = "udp:127.0.0.1:9000,127.0.0.1:9001,buffer=1MB"
            .parse()
            .unwrap();
        assert_eq!(l.options.len(), 3);
        assert_eq!(l.options[2], ("buffer".into(), "1MB".into()));
        assert_eq!("packet:veth0".parse::<LinkArg>().unwrap().kind, "packet");
        assert!("udp:127.0.0.1:9000".parse::<LinkArg>().is_err());
        assert!("eth0".parse::<LinkArg>().is_err());
        assert!("sim:x".parse::<LinkArg>().is_err());
    }

    #[test]
    fn services_parse_with_their_ports_and_refuse_nonsense() {
        let s: Vec<Service> = [
            "icmp",
            "udp-echo:7",
            "udp-discard:9",
            "udp-sink:9:42",
            "tcp-echo:7",
            "tcp-discard:9",
            "http:80:/srv/a:b",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        assert_eq!(
            s,
            [
                Service::Icmp,
                Service::UdpEcho(7),
                Service::UdpDiscard(9),
                Service::UdpSink(9, 42),
                Service::TcpEcho(7),
                Service::TcpDiscard(9),
                Service::Http(80, PathBuf::from("/srv/a:b")),
            ]
        );
        for bad in [
            "udp-echo",
            "udp-echo:0",
            "udp-echo:70000",
            "udp-echo:7:1",
            "tcp-echo",
            "tcp-discard:9:1",
            "http:80",
            "http:80:",
            "http:x:/srv",
            "tcp-sink:7",
            "udp-sink:9",
        ] {
            assert!(bad.parse::<Service>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_default_mac_is_local_unicast_and_follows_the_address() {
        let m = default_mac(Ipv4Addr::new(198, 18, 7, 2));
        assert_eq!(m.to_string(), "02:53:54:12:07:02");
        assert!(!m.is_multicast());
    }
}

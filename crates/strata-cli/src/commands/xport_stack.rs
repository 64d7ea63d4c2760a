//! `strata xsend`/`xrecv --link`: the transport over Strata's own
//! `xport/udp/ip/eth` on a link (the way `strata host`, `ping` and
//! `udp-send` pick one) instead of the kernel's UDP; and [`XStream`], what
//! the tools print beyond [`Stream`] (the one API of both), so one transfer
//! code runs on both.

use anyhow::{Context, Result};
use strata::link::RuntimeThread;
use strata::xport::{Stream, XportStream};
use strata::xport_stack::{KIND, StackStream};
use strata::{HostBuilder, HwAddr, Ipv4Cidr};

use super::host::{HostArgs, LinkArg};
use super::xport_args::XportArgs;

/// Run over Strata's own stack on a link.
#[derive(clap::Args, Debug, Clone)]
pub struct StackArgs {
    /// Run over Strata's own stack on this link instead of the kernel's
    /// sockets: tap:NAME, packet:IFACE or udp:LOCAL,PEER, with the kind's
    /// options as ,KEY=VALUE (as `strata host --link`).
    #[arg(long, requires = "ip")]
    pub link: Option<LinkArg>,
    /// With --link: this host's address and prefix, e.g. 198.18.1.2/24.
    #[arg(long, requires = "link")]
    pub ip: Option<Ipv4Cidr>,
    /// With --link: the default gateway.
    #[arg(long, requires = "link")]
    pub gw: Option<std::net::Ipv4Addr>,
    /// With --link: the hardware address (default 02:53:54 and the
    /// address's last three bytes).
    #[arg(long, requires = "link")]
    pub mac: Option<HwAddr>,
    /// With --link: capture the link's frames, both ways, to this pcap file.
    #[arg(long, requires = "link")]
    pub pcap: Option<std::path::PathBuf>,
}

impl StackArgs {
    /// Starts the host when a link was given: its engine runs on a thread
    /// until the returned handle is stopped.
    pub fn start(&self, x: &XportArgs) -> Result<Option<RuntimeThread>> {
        let sockets = i64::try_from(x.data_sockets.clamp(1, 16)).unwrap_or(1);
        let recovery = match x.recovery {
            strata::xport::RecoveryPolicy::GoBackN => "go-back-n",
            strata::xport::RecoveryPolicy::Selective => "selective",
            strata::xport::RecoveryPolicy::Adaptive => "adaptive",
        };
        self.start_stack("xport/udp/ip/eth", x.busy_poll, |b| {
            b.option(KIND, "data_sockets", sockets)
                .option(KIND, "recovery", recovery)
                .option(KIND, "rate_control", !x.no_rate_control)
                .option(KIND, "data_checksum", x.data_checksum)
                .option(KIND, "app_buffer", format!("{}B", x.buffer))
                .option(
                    KIND,
                    "idle_timeout",
                    format!("{}ms", x.idle_timeout.as_millis()),
                )
        })
    }

    /// Starts a host running `stack` with `options` added, when a link was
    /// given.
    pub fn start_stack(
        &self,
        stack: &str,
        busy_poll: bool,
        options: impl FnOnce(HostBuilder) -> HostBuilder,
    ) -> Result<Option<RuntimeThread>> {
        let (Some(link), Some(ip)) = (&self.link, self.ip) else {
            return Ok(None);
        };
        let host = HostArgs::short(
            link.clone(),
            ip,
            self.gw,
            self.mac,
            stack,
            self.pcap.clone(),
            busy_poll,
        );
        let engine = options(host.builder()?)
            .build()
            .with_context(|| format!("building the host's {stack}"))?;
        Ok(Some(host.start(engine)?))
    }
}

/// What the tools print of a stream beyond [`Stream`], the one API of
/// both ways to run the transport.
pub trait XStream: Stream {
    /// The peer's control address, as text.
    fn peer(&mut self) -> String {
        self.peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into())
    }
    /// The driver's counters as ` key=value` pairs, where received data
    /// went last.
    fn driver_counters(&mut self) -> String {
        let p = self.placement();
        format!(" placed={} copied={}", p.placed, p.copied)
    }
}

impl XStream for XportStream {
    fn driver_counters(&mut self) -> String {
        let u = self.udp_stats();
        format!(
            " sendmsg={} datagrams-out={} gso={} recvmmsg={} datagrams-in={} gro={} would-block={} \
             placed={} copied={}",
            u.send_calls,
            u.datagrams_out,
            u.gso_batches,
            u.recv_calls,
            u.datagrams_in,
            u.gro_batches,
            u.would_block,
            u.placed_bytes,
            u.copied_bytes,
        )
    }
}

impl XStream for StackStream {}

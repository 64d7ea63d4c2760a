//! `strata xsend`/`xrecv --link`: the transport over Strata's own
//! `xport/udp/ip/eth` on a link (the way `strata host`, `ping` and
//! `udp-send` pick one) instead of the kernel's UDP; and [`XStream`], what
//! the file transfer needs of a stream, so one transfer code runs on both.

use anyhow::{Context, Result};
use bytes::Bytes;
use strata::link::RuntimeThread;
use strata::xport::XportStream;
use strata::xport_stack::{Drops, KIND, PathInfo, StackStream, Stats};
use strata::{HwAddr, Ipv4Cidr};

use super::host::{HostArgs, LinkArg};
use super::xport_args::XportArgs;

/// Run over Strata's own stack on a link.
#[derive(clap::Args, Debug, Clone)]
pub struct StackArgs {
    /// Run over Strata's own xport/udp/ip/eth on this link instead of the
    /// kernel's UDP: tap:NAME, packet:IFACE or udp:LOCAL,PEER, with the
    /// kind's options as ,KEY=VALUE (as `strata host --link`).
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
        let (Some(link), Some(ip)) = (&self.link, self.ip) else {
            return Ok(None);
        };
        let host = HostArgs::short(
            link.clone(),
            ip,
            self.gw,
            self.mac,
            "xport/udp/ip/eth",
            self.pcap.clone(),
            x.busy_poll,
        );
        let sockets = i64::try_from(x.data_sockets.clamp(1, 16)).unwrap_or(1);
        let recovery = match x.recovery {
            strata::xport::RecoveryPolicy::GoBackN => "go-back-n",
            strata::xport::RecoveryPolicy::Selective => "selective",
            strata::xport::RecoveryPolicy::Adaptive => "adaptive",
        };
        let engine = host
            .builder()?
            .option(KIND, "data_sockets", sockets)
            .option(KIND, "recovery", recovery)
            .option(KIND, "rate_control", !x.no_rate_control)
            .option(KIND, "data_checksum", x.data_checksum)
            .option(KIND, "app_buffer", format!("{}B", x.buffer))
            .option(
                KIND,
                "idle_timeout",
                format!("{}ms", x.idle_timeout.as_millis()),
            )
            .build()
            .context("building the host's xport/udp/ip/eth")?;
        Ok(Some(host.start(engine)?))
    }
}

/// What the file transfer needs of a stream, over kernel UDP or Strata's stack.
pub trait XStream {
    /// Hands buffers over; returns those given back (at least one when any is in flight).
    fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>>;
    /// Ends the stream; every buffer acknowledged. Returns those not given back before.
    fn finish(&mut self) -> Result<Vec<Bytes>>;
    /// Posts a receive buffer without waiting.
    fn post_recv(&mut self, buf: Vec<u8>) -> Result<()>;
    /// Posts `buf`, waits for the oldest posted buffer filled: `(buffer, bytes)`.
    fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize)>;
    /// Both directions complete and acknowledged.
    fn close(self) -> Result<()>;
    /// Datagrams refused, by reason.
    fn drops(&mut self) -> Drops;
    /// RTT, windows and rate.
    fn info(&mut self) -> PathInfo;
    /// Counters.
    fn stats(&mut self) -> Stats;
    /// The peer's control address, as text.
    fn peer(&mut self) -> String;
    /// The driver's counters as ` key=value` pairs (none over Strata's
    /// stack: the host's counters are the engine's).
    fn driver_counters(&mut self) -> String;
}

impl XStream for XportStream {
    fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>> {
        Ok(XportStream::send(self, bufs)?)
    }
    fn finish(&mut self) -> Result<Vec<Bytes>> {
        Ok(XportStream::finish(self)?)
    }
    fn post_recv(&mut self, buf: Vec<u8>) -> Result<()> {
        XportStream::post_recv(self, buf);
        Ok(())
    }
    fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize)> {
        Ok(XportStream::recv(self, buf)?)
    }
    fn close(self) -> Result<()> {
        Ok(XportStream::close(self)?)
    }
    fn drops(&mut self) -> Drops {
        XportStream::drops(self)
    }
    fn info(&mut self) -> PathInfo {
        XportStream::info(self)
    }
    fn stats(&mut self) -> Stats {
        XportStream::stats(self)
    }
    fn peer(&mut self) -> String {
        self.peer_addr().to_string()
    }
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

impl XStream for StackStream {
    fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>> {
        Ok(StackStream::send(self, bufs)?)
    }
    fn finish(&mut self) -> Result<Vec<Bytes>> {
        Ok(StackStream::finish(self)?)
    }
    fn post_recv(&mut self, buf: Vec<u8>) -> Result<()> {
        Ok(StackStream::post_recv(self, buf)?)
    }
    fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize)> {
        Ok(StackStream::recv(self, buf)?)
    }
    fn close(self) -> Result<()> {
        Ok(StackStream::close(self)?)
    }
    fn drops(&mut self) -> Drops {
        StackStream::drops(self)
    }
    fn info(&mut self) -> PathInfo {
        StackStream::info(self).unwrap_or(PathInfo {
            srtt: Default::default(),
            peer_cwnd: 0,
            cwnd: 0,
            sending_rate: 0.0,
            in_flight: 0,
            delivered: 0,
            unacked: 0,
        })
    }
    fn stats(&mut self) -> Stats {
        StackStream::stats(self)
    }
    fn peer(&mut self) -> String {
        self.peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into())
    }
    fn driver_counters(&mut self) -> String {
        String::new()
    }
}

//! The `strata` command.

mod commands;

use clap::{Parser, Subcommand};

/// Strata: a user-space protocol framework in the line of the x-kernel.
///
/// Protocols are small layers wired into a graph at run time; the same protocol
/// code runs under three dispatch architectures (LLM, DAA, ILLM) on simulated
/// links, in-memory links and real ones (TAP, AF_PACKET, kernel UDP).
#[derive(Parser, Debug)]
#[command(name = "strata", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Strata's main job on the embedded in-memory network: two hosts on a lossy
    /// simulated link, the graph, ping, UDP echo, seed 000's RTT table, counters.
    Demo(commands::demo::Args),
    /// Show the protocol graph a stack spec or config builds.
    Graph(commands::graph::Args),
    /// Round trips of seed 000's ping-pong over a stack.
    Rtt(commands::rtt::Args),
    /// Run an experiment beside its peer.
    Bench(commands::bench::Args),
    /// Run a Strata host on a real link until interrupted.
    Host(commands::host::Args),
    /// Send ICMP echo requests from a Strata host.
    Ping(commands::ping::Args),
    /// Send UDP datagrams (or a checked transfer) from a Strata host.
    UdpSend(commands::udp_send::Args),
    /// Send a file over TCP from a Strata host.
    TcpSend(commands::tcp_send::Args),
    /// Receive one TCP connection's bytes into a file on a Strata host.
    TcpRecv(commands::tcp_recv::Args),
    /// Measure TCP throughput between Strata hosts, like iperf.
    Perf(commands::perf::Args),
    /// Bridge two interfaces through the link emulator.
    Wanem(commands::wanem::Args),
    /// Serve a folder over FTP (seed 001's ftpd).
    Ftpd(commands::ftpd::Args),
    /// Get, put or list files on an FTP server (seed 001's ftp).
    Ftp(commands::ftp::Args),
    /// Send a file over seed 001's transport (kernel UDP), resumable.
    Xsend(commands::xsend::SendArgs),
    /// Receive one file over seed 001's transport into a folder.
    Xrecv(commands::xsend::RecvArgs),
    /// Measure seed 001's transport between two hosts, like iperf.
    Xperf(commands::xperf::Args),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("STRATA_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => commands::demo::run(args),
        Command::Graph(args) => commands::graph::run(args),
        Command::Rtt(args) => commands::rtt::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Host(args) => commands::host::run(args),
        Command::Ping(args) => commands::ping::run(args),
        Command::UdpSend(args) => commands::udp_send::run(args),
        Command::TcpSend(args) => commands::tcp_send::run(args),
        Command::TcpRecv(args) => commands::tcp_recv::run(args),
        Command::Perf(args) => commands::perf::run(args),
        Command::Wanem(args) => commands::wanem::run(args),
        Command::Ftpd(args) => commands::ftpd::run(args),
        Command::Ftp(args) => commands::ftp::run(args),
        Command::Xsend(args) => commands::xsend::send(args),
        Command::Xrecv(args) => commands::xsend::recv(args),
        Command::Xperf(args) => commands::xperf::run(args),
    };
    if let Err(e) = result {
        eprintln!("strata: {e:#}");
        std::process::exit(1);
    }
}

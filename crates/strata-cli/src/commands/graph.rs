//! `strata graph`: show the protocol graph a stack spec or config builds.

use std::path::PathBuf;

use anyhow::{Context, Result};
use strata::{GraphConfig, HostBuilder, HostParams};

/// Show the protocol graph a stack spec or a config file builds.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["stack", "config"])))]
pub struct Args {
    /// A one-line stack spec, top layer first: `udp/ip/eth`, `tcp+udp/ip/eth`, `eth`.
    #[arg(long)]
    stack: Option<String>,
    /// A graph config in TOML ([link.NAME] and [protocol.NAME] tables).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print Graphviz dot instead of text.
    #[arg(long)]
    dot: bool,
    /// Print the expanded graph config as TOML.
    #[arg(long, conflicts_with = "dot")]
    toml: bool,
}

/// Runs `strata graph`.
pub fn run(args: Args) -> Result<()> {
    let host = match (&args.stack, &args.config) {
        (Some(spec), _) => HostBuilder::spec(spec, HostParams::numbered(1), "net0", "sim"),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            HostBuilder::config(GraphConfig::from_toml(&text)?, HostParams::numbered(1))
        }
        (None, None) => unreachable!("clap requires one of --stack and --config"),
    };
    if args.toml {
        print!("{}", host.graph()?.to_toml());
        return Ok(());
    }
    let engine = host.build()?;
    if args.dot {
        print!("{}", engine.graph_dot());
    } else {
        print!("{}", engine.graph_text());
    }
    Ok(())
}

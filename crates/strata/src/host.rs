//! Building a host's engine from a stack spec or a graph config.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use strata_core::graph::{self, GraphConfig, LinkConfig};
use strata_core::{Arch, Engine, EngineConfig, HwAddr};
use strata_proto::Ipv4Cidr;

use crate::Error;

/// Where a host's graph comes from.
#[derive(Clone, Debug)]
pub enum Stack {
    /// A one-line spec such as `udp/ip/eth`, on one link.
    Spec(String),
    /// A full graph config.
    Config(GraphConfig),
}

/// Who a host is on its network.
#[derive(Clone, Debug)]
pub struct HostParams {
    /// Link-layer address.
    pub mac: HwAddr,
    /// Network address and prefix.
    pub address: Ipv4Cidr,
    /// Default gateway.
    pub gateway: Option<Ipv4Addr>,
}

impl HostParams {
    /// Host number `n` of the benchmarking network 198.18.0.0/24 (RFC 2544), with
    /// a locally administered MAC derived from `n`.
    pub fn numbered(n: u8) -> HostParams {
        HostParams {
            mac: HwAddr::local(u16::from(n)),
            address: Ipv4Cidr::new(Ipv4Addr::new(198, 18, 0, n), 24)
                .expect("24 is a valid prefix length"),
            gateway: None,
        }
    }
}

/// A host to build: its graph, its identity and the engine settings.
#[derive(Clone, Debug)]
pub struct HostBuilder {
    stack: Stack,
    params: HostParams,
    link: LinkConfig,
    engine: EngineConfig,
    /// Extra options for protocols of a spec-built host, by kind.
    options: BTreeMap<String, toml::Table>,
}

impl HostBuilder {
    /// A host running `spec` (e.g. `udp/ip/eth`) on one link called `link` of kind
    /// `kind`.
    pub fn spec(spec: &str, params: HostParams, link: &str, kind: &str) -> Self {
        HostBuilder {
            stack: Stack::Spec(spec.into()),
            params,
            link: LinkConfig::new(link, kind),
            engine: EngineConfig::default(),
            options: BTreeMap::new(),
        }
    }

    /// A host running a graph config as written.
    pub fn config(config: GraphConfig, params: HostParams) -> Self {
        HostBuilder {
            stack: Stack::Config(config),
            params,
            link: LinkConfig::new("net0", "mem"),
            engine: EngineConfig::default(),
            options: BTreeMap::new(),
        }
    }

    /// Sets the dispatch architecture.
    pub fn arch(mut self, arch: Arch) -> Self {
        self.engine.arch = Some(arch);
        self
    }

    /// Seeds the engine's random number generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.engine.seed = seed;
        self
    }

    /// Sets an option of the link (for a spec-built host).
    pub fn link_option(mut self, key: &str, value: impl Into<toml::Value>) -> Self {
        self.link.options.set(key, value);
        self
    }

    /// Sets an option of the protocol of kind `kind` (for a spec-built host; kinds
    /// not in the stack are ignored).
    pub fn option(mut self, kind: &str, key: &str, value: impl Into<toml::Value>) -> Self {
        self.options
            .entry(kind.into())
            .or_default()
            .insert(key.into(), value.into());
        self
    }

    /// The graph config this builder stands for.
    pub fn graph(&self) -> Result<GraphConfig, Error> {
        match &self.stack {
            Stack::Config(c) => Ok(c.clone()),
            Stack::Spec(spec) => {
                let mut opts = strata_proto::host_options(
                    self.params.mac,
                    self.params.address,
                    self.params.gateway,
                );
                for (kind, table) in &self.options {
                    opts.entry(kind.clone()).or_default().extend(table.clone());
                }
                Ok(graph::from_spec(
                    spec,
                    &crate::registry(),
                    self.link.clone(),
                    &opts,
                )?)
            }
        }
    }

    /// Builds the engine.
    pub fn build(&self) -> Result<Engine, Error> {
        let built = graph::build(&self.graph()?, &crate::registry())?;
        Ok(Engine::new(built, self.engine.clone())?)
    }
}

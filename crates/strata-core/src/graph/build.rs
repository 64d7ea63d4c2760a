//! Validating a graph config and making its protocols.

use std::collections::BTreeMap;

use super::config::GraphConfig;
use super::registry::Registry;
use super::{GraphError, LinkNode, Lower, Node};
use crate::arch::Arch;
use crate::ids::{LinkId, ProtoId, Upper};
use crate::upi::Protocol;

/// One thing below a protocol being built.
#[derive(Clone, Debug)]
pub struct LowerInfo {
    /// Its instance name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Its handle.
    pub lower: Lower,
}

/// What a factory learns about the protocol it makes.
#[derive(Clone, Debug)]
pub struct BuildInfo {
    /// The new protocol's handle.
    pub id: ProtoId,
    /// Its instance name.
    pub name: String,
    /// What sits below it, in config order.
    pub lowers: Vec<LowerInfo>,
}

impl BuildInfo {
    /// The first lower of the given kind.
    pub fn lower_of_kind(&self, kind: &str) -> Option<&LowerInfo> {
        self.lowers.iter().find(|l| l.kind == kind)
    }

    /// The first lower protocol whose kind is not in `except`.
    pub fn lower_proto_except(&self, except: &[&str]) -> Option<ProtoId> {
        self.lowers.iter().find_map(|l| match l.lower {
            Lower::Proto(p) if !except.contains(&l.kind.as_str()) => Some(p),
            _ => None,
        })
    }

    /// The link below, for protocols that sit directly on one.
    pub fn link(&self) -> Option<LinkId> {
        self.lowers.iter().find_map(|l| match l.lower {
            Lower::Link(id) => Some(id),
            Lower::Proto(_) => None,
        })
    }

    /// An error saying this protocol needs something below it of `what`.
    pub fn needs_below(&self, what: &str) -> GraphError {
        GraphError::LinkUse {
            link: self.name.clone(),
            problem: format!("needs {what} below it"),
        }
    }
}

/// A validated graph with its protocols made, ready for an engine.
pub struct Built {
    /// The config's architecture, if it named one.
    pub arch: Option<Arch>,
    /// Protocol nodes, indexed by `ProtoId`, lowest first.
    pub nodes: Vec<Node>,
    /// Links, indexed by `LinkId`.
    pub links: Vec<LinkNode>,
    /// The protocol objects, parallel to `nodes`.
    pub protocols: Vec<Box<dyn Protocol>>,
}

/// Validates `cfg` against `reg` and makes every protocol.
pub fn build(cfg: &GraphConfig, reg: &Registry) -> Result<Built, GraphError> {
    let proto_index: BTreeMap<&str, usize> = cfg
        .protocols
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let link_index: BTreeMap<&str, usize> = cfg
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();

    for l in &cfg.links {
        if proto_index.contains_key(l.name.as_str()) {
            return Err(GraphError::DuplicateName(l.name.clone()));
        }
        let spec = reg.link(&l.kind).ok_or_else(|| GraphError::UnknownLink {
            name: l.name.clone(),
            kind: l.kind.clone(),
            known: reg.known_links(),
        })?;
        let known: Vec<&str> = spec.options.iter().map(|o| o.name).collect();
        l.options.check_known(&known)?;
        if let Some(validate) = spec.validate {
            validate(&l.options)?;
        }
    }
    for p in &cfg.protocols {
        let spec = reg
            .protocol(&p.kind)
            .ok_or_else(|| GraphError::UnknownProtocol {
                name: p.name.clone(),
                kind: p.kind.clone(),
                known: reg.known_protocols(),
            })?;
        let known: Vec<&str> = spec.options.iter().map(|o| o.name).collect();
        p.options.check_known(&known)?;
        if p.below.is_empty() {
            return Err(GraphError::NothingBelow(p.name.clone()));
        }
        for b in &p.below {
            if !proto_index.contains_key(b.as_str()) && !link_index.contains_key(b.as_str()) {
                return Err(GraphError::UnknownBelow {
                    name: p.name.clone(),
                    below: b.clone(),
                });
            }
        }
    }

    let order = topological_order(cfg, &proto_index)?;

    // Each link carries exactly one protocol: the driver hands every frame to it.
    let mut link_upper: Vec<Option<usize>> = vec![None; cfg.links.len()];
    for (pi, p) in cfg.protocols.iter().enumerate() {
        for b in &p.below {
            if let Some(&li) = link_index.get(b.as_str()) {
                if let Some(other) = link_upper[li] {
                    return Err(GraphError::LinkUse {
                        link: b.clone(),
                        problem: format!(
                            "carries both '{}' and '{}'; a link carries one protocol",
                            cfg.protocols[other].name, p.name
                        ),
                    });
                }
                link_upper[li] = Some(pi);
            }
        }
    }
    if let Some(li) = link_upper.iter().position(Option::is_none) {
        return Err(GraphError::LinkUse {
            link: cfg.links[li].name.clone(),
            problem: "no protocol sits on it".into(),
        });
    }

    // ProtoIds follow the topological order: lower protocols get smaller ids.
    let mut id_of = vec![ProtoId(0); cfg.protocols.len()];
    for (rank, &pi) in order.iter().enumerate() {
        id_of[pi] = ProtoId(rank as u16);
    }
    let lower_of = |name: &str| -> Lower {
        match proto_index.get(name) {
            Some(&pi) => Lower::Proto(id_of[pi]),
            None => Lower::Link(LinkId(link_index[name] as u16)),
        }
    };

    let mut nodes: Vec<Node> = order
        .iter()
        .map(|&pi| {
            let p = &cfg.protocols[pi];
            Node {
                name: p.name.clone(),
                kind: p.kind.clone(),
                lowers: p.below.iter().map(|b| lower_of(b)).collect(),
                above: Vec::new(),
            }
        })
        .collect();

    // Numbers: each upper's number in each demultiplexing lower.
    for &pi in &order {
        let upper = &cfg.protocols[pi];
        for b in &upper.below {
            let Some(&li) = proto_index.get(b.as_str()) else {
                continue;
            };
            let lower = &cfg.protocols[li];
            let number = upper
                .numbers
                .get(&lower.kind)
                .copied()
                .or_else(|| reg.numbers().get(&lower.kind, &upper.kind));
            let demuxes = reg.protocol(&lower.kind).is_some_and(|s| s.demux_by_number);
            let Some(number) = number else {
                if demuxes {
                    return Err(GraphError::NoNumber {
                        upper: upper.name.clone(),
                        lower: lower.name.clone(),
                        lower_kind: lower.kind.clone(),
                    });
                }
                continue;
            };
            let lower_id = id_of[li].index();
            if let Some(Upper::Proto(clash)) = nodes[lower_id].upper_for(number) {
                return Err(GraphError::NumberClash {
                    lower: lower.name.clone(),
                    number,
                    first: nodes[clash.index()].name.clone(),
                    second: upper.name.clone(),
                });
            }
            nodes[lower_id]
                .above
                .push((number, Upper::Proto(id_of[pi])));
        }
    }

    let links = cfg
        .links
        .iter()
        .enumerate()
        .map(|(li, l)| LinkNode {
            name: l.name.clone(),
            kind: l.kind.clone(),
            options: l.options.clone(),
            upper: id_of[link_upper[li].unwrap_or_default()],
        })
        .collect();

    let mut protocols = Vec::with_capacity(order.len());
    for &pi in &order {
        let p = &cfg.protocols[pi];
        let info = BuildInfo {
            id: id_of[pi],
            name: p.name.clone(),
            lowers: p
                .below
                .iter()
                .map(|b| LowerInfo {
                    name: b.clone(),
                    kind: match proto_index.get(b.as_str()) {
                        Some(&li) => cfg.protocols[li].kind.clone(),
                        None => cfg.links[link_index[b.as_str()]].kind.clone(),
                    },
                    lower: lower_of(b),
                })
                .collect(),
        };
        let spec = reg
            .protocol(&p.kind)
            .ok_or_else(|| GraphError::UnknownProtocol {
                name: p.name.clone(),
                kind: p.kind.clone(),
                known: reg.known_protocols(),
            })?;
        protocols.push((spec.factory)(p, &info)?);
    }

    Ok(Built {
        arch: cfg.arch,
        nodes,
        links,
        protocols,
    })
}

/// Orders protocols so every protocol comes after all protocols below it, or
/// reports a cycle by its members.
fn topological_order(
    cfg: &GraphConfig,
    index: &BTreeMap<&str, usize>,
) -> Result<Vec<usize>, GraphError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let n = cfg.protocols.len();
    let mut mark = vec![Mark::New; n];
    let mut order = Vec::with_capacity(n);
    // Iterative DFS: (node, next below to visit).
    for start in 0..n {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Open;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let below = &cfg.protocols[node].below;
            if *next < below.len() {
                let b = &below[*next];
                *next += 1;
                let Some(&child) = index.get(b.as_str()) else {
                    continue;
                };
                match mark[child] {
                    Mark::New => {
                        mark[child] = Mark::Open;
                        stack.push((child, 0));
                    }
                    Mark::Open => {
                        let from = stack.iter().position(|(s, _)| *s == child).unwrap_or(0);
                        let mut cycle: Vec<String> = stack[from..]
                            .iter()
                            .map(|(s, _)| cfg.protocols[*s].name.clone())
                            .collect();
                        cycle.push(cfg.protocols[child].name.clone());
                        return Err(GraphError::Cycle(cycle));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                order.push(node);
                stack.pop();
            }
        }
    }
    Ok(order)
}

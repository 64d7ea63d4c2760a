//! Drawing a built graph: as indented text for people and as Graphviz dot.

use std::fmt::Write;

use super::{LinkNode, Lower, Node};
use crate::ids::Upper;

fn lower_name(nodes: &[Node], links: &[LinkNode], l: &Lower) -> String {
    match l {
        Lower::Proto(p) => nodes[p.index()].name.clone(),
        Lower::Link(id) => links[id.index()].name.clone(),
    }
}

/// The graph as text, top protocols first, each with what sits below it and the
/// numbers its uppers use.
pub fn to_text(nodes: &[Node], links: &[LinkNode]) -> String {
    let mut out = String::new();
    for n in nodes.iter().rev() {
        let below: Vec<String> = n
            .lowers
            .iter()
            .map(|l| lower_name(nodes, links, l))
            .collect();
        let _ = write!(out, "{:<8} ({}) on {}", n.name, n.kind, below.join(", "));
        let numbered: Vec<String> = n
            .above
            .iter()
            .filter_map(|(num, u)| match u {
                Upper::Proto(p) => Some(format!("{}={:#06x}", nodes[p.index()].name, num)),
                Upper::App(_) => None,
            })
            .collect();
        if !numbered.is_empty() {
            let _ = write!(out, "  [above: {}]", numbered.join(", "));
        }
        out.push('\n');
    }
    for l in links {
        let _ = writeln!(
            out,
            "{:<8} (link: {}) carries {}",
            l.name,
            l.kind,
            nodes[l.upper.index()].name
        );
    }
    out
}

/// The graph in Graphviz dot: protocols as boxes, links as ellipses, edges from
/// each protocol down to what it sits on, labelled with its number there.
pub fn to_dot(nodes: &[Node], links: &[LinkNode]) -> String {
    let mut out = String::from("digraph strata {\n  rankdir=BT;\n  node [shape=box];\n");
    for l in links {
        let _ = writeln!(
            out,
            "  \"{}\" [shape=ellipse, label=\"{}\\n({})\"];",
            l.name, l.name, l.kind
        );
    }
    for n in nodes {
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\\n({})\"];",
            n.name, n.name, n.kind
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        for l in &n.lowers {
            let label = match l {
                Lower::Proto(p) => nodes[p.index()]
                    .above
                    .iter()
                    .find(|(_, u)| *u == Upper::Proto(crate::ids::ProtoId(i as u16)))
                    .map(|(num, _)| format!(" [label=\"{num:#x}\"]"))
                    .unwrap_or_default(),
                Lower::Link(_) => String::new(),
            };
            let _ = writeln!(
                out,
                "  \"{}\" -> \"{}\"{};",
                n.name,
                lower_name(nodes, links, l),
                label
            );
        }
    }
    out.push_str("}\n");
    out
}

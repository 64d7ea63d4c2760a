//! One-line stack specs: `udp/ip/eth` names layers from the top down; `udp+tcp/ip/eth`
//! puts two protocols side by side in a layer. Companions a protocol needs are
//! added as its registry entry says (ARP beside IP, ICMP above IP), so the one
//! line builds the same graph a hand-written config would.

use std::collections::BTreeMap;

use super::GraphError;
use super::config::{GraphConfig, LinkConfig, ProtocolConfig};
use super::registry::Registry;

/// Expands `spec` into a graph config whose lowest layer sits on `link`, taking
/// each protocol's options from `options` (keyed by kind; kinds not in the stack
/// are ignored, so one map can serve every stack of a host).
pub fn from_spec(
    spec: &str,
    reg: &Registry,
    link: LinkConfig,
    options: &BTreeMap<String, toml::Table>,
) -> Result<GraphConfig, GraphError> {
    let bad = |problem: String| GraphError::BadSpec {
        spec: spec.into(),
        problem,
    };
    let mut layers: Vec<Vec<String>> = Vec::new();
    for layer in spec.split('/').rev() {
        let kinds: Vec<String> = layer
            .split('+')
            .map(|k| k.trim().to_ascii_lowercase())
            .collect();
        if kinds.iter().any(|k| k.is_empty()) {
            return Err(bad("empty layer (want names like udp/ip/eth)".into()));
        }
        for k in &kinds {
            if reg.protocol(k).is_none() {
                return Err(bad(format!(
                    "unknown protocol '{k}' (known: {})",
                    reg.known_protocols()
                )));
            }
        }
        layers.push(kinds);
    }
    if layers.is_empty() {
        return Err(bad("no layers".into()));
    }

    let mut protocols: Vec<ProtocolConfig> = Vec::new();
    let mut below: Vec<String> = vec![link.name.clone()];
    for layer in &layers {
        for kind in layer {
            if protocols.iter().any(|p| &p.kind == kind) {
                return Err(bad(format!("'{kind}' appears twice")));
            }
            let refs: Vec<&str> = below.iter().map(String::as_str).collect();
            protocols.push(ProtocolConfig::new(kind, &refs));
        }
        below = layer.clone();
    }

    // Companions, in a second pass so they see the whole stack.
    let mut i = 0;
    while i < protocols.len() {
        let kind = protocols[i].kind.clone();
        let Some(entry) = reg.protocol(&kind) else {
            i += 1;
            continue;
        };
        for beside in entry.implies_beside {
            if !protocols.iter().any(|p| p.kind == *beside) {
                let lowers: Vec<&str> = protocols[i].below.iter().map(String::as_str).collect();
                let companion = ProtocolConfig::new(beside, &lowers);
                protocols.push(companion);
            }
            if !protocols[i].below.iter().any(|b| b == beside) {
                protocols[i].below.push(beside.to_string());
            }
        }
        for above in entry.implies_above {
            if !protocols.iter().any(|p| p.kind == *above) {
                protocols.push(ProtocolConfig::new(above, &[kind.as_str()]));
            }
        }
        i += 1;
    }

    for p in &mut protocols {
        if let Some(opts) = options.get(&p.kind) {
            let accepted: Vec<&str> = reg
                .protocol(&p.kind)
                .map(|s| s.options.iter().map(|o| o.name).collect())
                .unwrap_or_default();
            for (k, v) in opts {
                if accepted.contains(&k.as_str()) {
                    p.options.set(k, v.clone());
                }
            }
        }
    }
    protocols.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(GraphConfig {
        arch: None,
        links: vec![link],
        protocols,
    })
}

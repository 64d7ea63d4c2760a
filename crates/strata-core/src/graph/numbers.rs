//! The protocol-number table (the x-kernel's prottbl): the number each protocol is
//! known by in each demultiplexing protocol below it — an ethertype in Ethernet, a
//! protocol number in IPv4. The table is data; a config may extend it per protocol.

use std::collections::BTreeMap;

use super::GraphError;

/// Numbers by (lower kind, upper kind).
#[derive(Clone, Debug, Default)]
pub struct NumberTable {
    map: BTreeMap<(String, String), u32>,
}

impl NumberTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `upper` is number `n` in `lower`.
    pub fn insert(&mut self, lower: &str, upper: &str, n: u32) {
        self.map.insert((lower.into(), upper.into()), n);
    }

    /// The number of `upper` in `lower`.
    pub fn get(&self, lower: &str, upper: &str) -> Option<u32> {
        self.map
            .get(&(lower.to_string(), upper.to_string()))
            .copied()
    }

    /// Adds entries from TOML: a table per lower kind of `upper = number`.
    ///
    /// ```toml
    /// [eth]
    /// ip = 0x0800
    /// ```
    pub fn load_toml(&mut self, text: &str) -> Result<(), GraphError> {
        let root: toml::Table = text
            .parse()
            .map_err(|e| GraphError::Syntax(format!("number table: {e}")))?;
        for (lower, uppers) in root {
            let toml::Value::Table(uppers) = uppers else {
                return Err(GraphError::Syntax(format!(
                    "number table: [{lower}] must be a table"
                )));
            };
            for (upper, n) in uppers {
                let n = n
                    .as_integer()
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or_else(|| {
                        GraphError::Syntax(format!(
                            "number table: {lower}.{upper} must be a number"
                        ))
                    })?;
                self.insert(&lower, &upper, n);
            }
        }
        Ok(())
    }

    /// Every entry, as (lower, upper, number).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, u32)> {
        self.map
            .iter()
            .map(|((l, u), n)| (l.as_str(), u.as_str(), *n))
    }
}

//! The graph config: `[link.NAME]` and `[protocol.NAME]` tables in TOML.
//!
//! ```toml
//! arch = "llm"                 # optional: llm | daa | illm
//!
//! [link.net0]
//! kind = "sim"
//!
//! [protocol.eth]               # kind defaults to the table name
//! below = ["net0"]
//! mac = "02:53:54:00:00:01"
//!
//! [protocol.ip]
//! below = ["eth", "arp"]
//! address = "198.18.0.1/24"
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::GraphError;
use crate::arch::Arch;
use crate::units;

/// A parsed graph config.
#[derive(Clone, Debug, Default)]
pub struct GraphConfig {
    /// The dispatch architecture, when the config names one.
    pub arch: Option<Arch>,
    /// Links, by name order.
    pub links: Vec<LinkConfig>,
    /// Protocols, by name order.
    pub protocols: Vec<ProtocolConfig>,
}

/// One `[link.NAME]` table.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// The table name.
    pub name: String,
    /// The driver kind.
    pub kind: String,
    /// Every other key.
    pub options: Options,
}

/// One `[protocol.NAME]` table.
#[derive(Clone, Debug)]
pub struct ProtocolConfig {
    /// The table name.
    pub name: String,
    /// The factory kind (defaults to the name).
    pub kind: String,
    /// Names of the protocols and links below, in order.
    pub below: Vec<String>,
    /// This protocol's numbers in lower protocols' number spaces, by lower kind,
    /// overriding the number table (`numbers = { ip = 253 }`).
    pub numbers: BTreeMap<String, u32>,
    /// Every other key.
    pub options: Options,
}

impl LinkConfig {
    /// A link of `kind` called `name` with no options.
    pub fn new(name: &str, kind: &str) -> Self {
        LinkConfig {
            name: name.into(),
            kind: kind.into(),
            options: Options::new(format!("link '{name}'")),
        }
    }
}

impl ProtocolConfig {
    /// A protocol of kind `kind` (also its name) sitting on `below`.
    pub fn new(kind: &str, below: &[&str]) -> Self {
        ProtocolConfig {
            name: kind.into(),
            kind: kind.into(),
            below: below.iter().map(|s| s.to_string()).collect(),
            numbers: BTreeMap::new(),
            options: Options::new(format!("protocol '{kind}'")),
        }
    }
}

/// A table of options with typed, culprit-naming accessors.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    owner: String,
    table: toml::Table,
}

impl Options {
    /// Empty options belonging to `owner` (named in errors).
    pub fn new(owner: String) -> Self {
        Options {
            owner,
            table: toml::Table::new(),
        }
    }

    /// Who these options belong to, as errors name it.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Sets an option (used by spec expansion and tools).
    pub fn set(&mut self, key: &str, value: impl Into<toml::Value>) {
        self.table.insert(key.into(), value.into());
    }

    /// True when the option is present.
    pub fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// The option names present.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.table.keys().map(|k| k.as_str())
    }

    /// The raw table.
    pub fn table(&self) -> &toml::Table {
        &self.table
    }

    fn bad(&self, key: &str, problem: impl fmt::Display) -> GraphError {
        GraphError::BadOption {
            owner: self.owner.clone(),
            option: key.into(),
            problem: problem.to_string(),
        }
    }

    /// An error for a required option that is absent.
    pub fn missing(&self, key: &str) -> GraphError {
        GraphError::MissingOption {
            owner: self.owner.clone(),
            option: key.into(),
        }
    }

    /// The option as text (strings as they are, numbers and booleans printed).
    pub fn text(&self, key: &str) -> Result<Option<String>, GraphError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(toml::Value::Integer(i)) => Ok(Some(i.to_string())),
            Some(toml::Value::Float(f)) => Ok(Some(f.to_string())),
            Some(toml::Value::Boolean(b)) => Ok(Some(b.to_string())),
            Some(other) => {
                Err(self.bad(key, format!("expected a value, got {}", other.type_str())))
            }
        }
    }

    /// The option parsed with `FromStr`.
    pub fn get<T: FromStr>(&self, key: &str) -> Result<Option<T>, GraphError>
    where
        T::Err: fmt::Display,
    {
        self.text(key)?
            .map(|s| s.parse::<T>().map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// A required option parsed with `FromStr`.
    pub fn require<T: FromStr>(&self, key: &str) -> Result<T, GraphError>
    where
        T::Err: fmt::Display,
    {
        self.get(key)?.ok_or_else(|| self.missing(key))
    }

    /// A list of values each parsed with `FromStr` (a TOML array or one value).
    pub fn list<T: FromStr>(&self, key: &str) -> Result<Vec<T>, GraphError>
    where
        T::Err: fmt::Display,
    {
        match self.table.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| {
                    let s = match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    s.parse::<T>().map_err(|e| self.bad(key, e))
                })
                .collect(),
            Some(_) => Ok(vec![self.require(key)?]),
        }
    }

    /// A duration ("50ms").
    pub fn duration(&self, key: &str) -> Result<Option<Duration>, GraphError> {
        self.text(key)?
            .map(|s| units::parse_duration(&s).map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// A bit rate in bits per second ("100mbit").
    pub fn rate(&self, key: &str) -> Result<Option<u64>, GraphError> {
        self.text(key)?
            .map(|s| units::parse_rate(&s).map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// A size in bytes ("256KB").
    pub fn size(&self, key: &str) -> Result<Option<u64>, GraphError> {
        self.text(key)?
            .map(|s| units::parse_size(&s).map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// A probability ("1%", "1e-8").
    pub fn fraction(&self, key: &str) -> Result<Option<f64>, GraphError> {
        self.text(key)?
            .map(|s| units::parse_fraction(&s).map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// Refuses options not in `known`, naming the first stranger.
    pub fn check_known(&self, known: &[&str]) -> Result<(), GraphError> {
        for key in self.table.keys() {
            if !known.contains(&key.as_str()) {
                let list = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(self.bad(key, format!("unknown option (known: {list})")));
            }
        }
        Ok(())
    }
}

fn syntax(msg: impl fmt::Display) -> GraphError {
    GraphError::Syntax(msg.to_string())
}

fn take_string(t: &mut toml::Table, key: &str, owner: &str) -> Result<Option<String>, GraphError> {
    match t.remove(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(syntax(format!(
            "{owner}: '{key}' must be a string, not {}",
            v.type_str()
        ))),
    }
}

fn tables(root: &mut toml::Table, key: &str) -> Result<Vec<(String, toml::Table)>, GraphError> {
    match root.remove(key) {
        None => Ok(Vec::new()),
        Some(toml::Value::Table(t)) => t
            .into_iter()
            .map(|(name, v)| match v {
                toml::Value::Table(inner) => Ok((name, inner)),
                other => Err(syntax(format!(
                    "[{key}.{name}] must be a table, not {}",
                    other.type_str()
                ))),
            })
            .collect(),
        Some(other) => Err(syntax(format!(
            "'{key}' must be a table, not {}",
            other.type_str()
        ))),
    }
}

impl GraphConfig {
    /// Parses a graph config from TOML text.
    pub fn from_toml(text: &str) -> Result<GraphConfig, GraphError> {
        let mut root: toml::Table = text.parse().map_err(syntax)?;
        let arch = take_string(&mut root, "arch", "graph")?
            .map(|s| s.parse::<Arch>().map_err(syntax))
            .transpose()?;
        let mut links = Vec::new();
        for (name, mut t) in tables(&mut root, "link")? {
            let owner = format!("link '{name}'");
            let kind = take_string(&mut t, "kind", &owner)?
                .ok_or_else(|| syntax(format!("{owner}: missing 'kind' (e.g. kind = \"sim\")")))?;
            links.push(LinkConfig {
                name,
                kind,
                options: Options { owner, table: t },
            });
        }
        let mut protocols = Vec::new();
        for (name, mut t) in tables(&mut root, "protocol")? {
            let owner = format!("protocol '{name}'");
            let kind = take_string(&mut t, "kind", &owner)?.unwrap_or_else(|| name.clone());
            let below = match t.remove("below") {
                None => Vec::new(),
                Some(toml::Value::Array(items)) => items
                    .into_iter()
                    .map(|v| match v {
                        toml::Value::String(s) => Ok(s),
                        other => Err(syntax(format!(
                            "{owner}: below entries must be names, not {}",
                            other.type_str()
                        ))),
                    })
                    .collect::<Result<_, _>>()?,
                Some(toml::Value::String(s)) => vec![s],
                Some(other) => {
                    return Err(syntax(format!(
                        "{owner}: below must be a list of names, not {}",
                        other.type_str()
                    )));
                }
            };
            let mut numbers = BTreeMap::new();
            match t.remove("numbers") {
                None => {}
                Some(toml::Value::Table(nt)) => {
                    for (lower, v) in nt {
                        let n = v
                            .as_integer()
                            .and_then(|i| u32::try_from(i).ok())
                            .ok_or_else(|| {
                                syntax(format!("{owner}: numbers.{lower} must be a number"))
                            })?;
                        numbers.insert(lower, n);
                    }
                }
                Some(_) => return Err(syntax(format!("{owner}: numbers must be a table"))),
            }
            protocols.push(ProtocolConfig {
                name,
                kind,
                below,
                numbers,
                options: Options { owner, table: t },
            });
        }
        if let Some(stray) = root.keys().next() {
            return Err(syntax(format!(
                "unknown top-level key '{stray}' (expected arch, [link.NAME], [protocol.NAME])"
            )));
        }
        Ok(GraphConfig {
            arch,
            links,
            protocols,
        })
    }

    /// Renders the config back to TOML (for `strata graph --stack … --toml`).
    pub fn to_toml(&self) -> String {
        let mut root = toml::Table::new();
        if let Some(arch) = self.arch {
            root.insert("arch".into(), arch.to_string().into());
        }
        let mut links = toml::Table::new();
        for l in &self.links {
            let mut t = l.options.table.clone();
            t.insert("kind".into(), l.kind.clone().into());
            links.insert(l.name.clone(), t.into());
        }
        let mut protos = toml::Table::new();
        for p in &self.protocols {
            let mut t = p.options.table.clone();
            if p.kind != p.name {
                t.insert("kind".into(), p.kind.clone().into());
            }
            t.insert(
                "below".into(),
                toml::Value::Array(p.below.iter().map(|b| b.clone().into()).collect()),
            );
            if !p.numbers.is_empty() {
                let nt: toml::Table = p
                    .numbers
                    .iter()
                    .map(|(k, v)| (k.clone(), toml::Value::Integer(i64::from(*v))))
                    .collect();
                t.insert("numbers".into(), nt.into());
            }
            protos.insert(p.name.clone(), t.into());
        }
        if !links.is_empty() {
            root.insert("link".into(), links.into());
        }
        if !protos.is_empty() {
            root.insert("protocol".into(), protos.into());
        }
        toml::to_string(&root).unwrap_or_default()
    }

    /// The protocol called `name`.
    pub fn protocol_mut(&mut self, name: &str) -> Option<&mut ProtocolConfig> {
        self.protocols.iter_mut().find(|p| p.name == name)
    }

    /// The link called `name`.
    pub fn link_mut(&mut self, name: &str) -> Option<&mut LinkConfig> {
        self.links.iter_mut().find(|l| l.name == name)
    }
}

//! The config file's reference, flxp.toml(5), generated from the config's own definitions: each
//! key's meaning is the doc comment of its field in the struct serde reads it with, and its
//! default is that struct's `Default` (as its `Debug` shows it), so the page cannot drift from
//! the parser. A test asks the parser which keys each table accepts and checks the page lists
//! exactly those.

use std::fmt::Write as _;

use super::sections;

/// One table of the file and the struct it is read into.
struct Table {
    /// The table as written in the file (`zones.NAME`, `[[plugin]]` as `plugin`).
    path: &'static str,
    /// The struct's name in `source`, with its type parameters.
    strukt: &'static str,
    /// The source file defining it.
    source: &'static str,
    /// `{:#?}` of the struct's default, when it has one.
    default: Option<fn() -> String>,
    /// How the table is written, when not `[path]`.
    header: Option<&'static str>,
}

const CONFIG_RS: &str = include_str!("mod.rs");
const SECTIONS_RS: &str = include_str!("sections.rs");
const ZONE_RS: &str = include_str!("../../../flxp-pve/src/zone.rs");
const OPTIONS_RS: &str = include_str!("../../../flxp-core/src/balance/options.rs");
const TRIGGER_RS: &str = include_str!("../../../flxp-core/src/balance/trigger.rs");

fn dbg<T: std::fmt::Debug + Default>() -> String {
    format!("{:#?}", T::default())
}

/// Every table, in the order of the page.
const TABLES: &[Table] = &[
    Table {
        path: "",
        strukt: "ConfigOf<B>",
        source: CONFIG_RS,
        default: None,
        header: Some("top level"),
    },
    Table {
        path: "zones.NAME",
        strukt: "ZoneConfig",
        source: ZONE_RS,
        default: Some(dbg::<flxp_pve::ZoneConfig>),
        header: None,
    },
    Table {
        path: "placement",
        strukt: "PlacementSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::PlacementSection>),
        header: None,
    },
    Table {
        path: "balance",
        strukt: "BalanceOptionsOf<M>",
        source: OPTIONS_RS,
        default: Some(dbg::<flxp_core::balance::BalanceOptions>),
        header: None,
    },
    Table {
        path: "balance.trigger",
        strukt: "Trigger",
        source: TRIGGER_RS,
        default: Some(dbg::<flxp_core::balance::trigger::Trigger>),
        header: None,
    },
    Table {
        path: "balance.trigger.pressure",
        strukt: "PressureGate",
        source: TRIGGER_RS,
        default: Some(dbg::<flxp_core::balance::trigger::PressureGate>),
        header: None,
    },
    Table {
        path: "evacuate",
        strukt: "EvacuateOptions",
        source: OPTIONS_RS,
        default: Some(dbg::<flxp_core::balance::EvacuateOptions>),
        header: None,
    },
    Table {
        path: "rolling",
        strukt: "RollingSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::RollingSection>),
        header: None,
    },
    Table {
        path: "consolidate",
        strukt: "ConsolidateSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::ConsolidateSection>),
        header: None,
    },
    Table {
        path: "migration",
        strukt: "MigrationSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::MigrationSection>),
        header: None,
    },
    Table {
        path: "daemon",
        strukt: "DaemonSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::DaemonSection>),
        header: None,
    },
    Table {
        path: "lease",
        strukt: "LeaseSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::LeaseSection>),
        header: None,
    },
    Table {
        path: "api",
        strukt: "ApiSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::ApiSection>),
        header: None,
    },
    Table {
        path: "api.tokens",
        strukt: "ApiToken",
        source: SECTIONS_RS,
        default: None,
        header: Some("api.tokens = [{ ... }, ...]"),
    },
    Table {
        path: "overrides.ZONE.NODE",
        strukt: "NodeOverride",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::NodeOverride>),
        header: None,
    },
    Table {
        path: "compute-profiles.NAME",
        strukt: "ComputeProfile",
        source: SECTIONS_RS,
        default: None,
        header: None,
    },
    Table {
        path: "storage-profiles.NAME",
        strukt: "StorageProfile",
        source: SECTIONS_RS,
        default: None,
        header: None,
    },
    Table {
        path: "images.NAME",
        strukt: "Image",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::Image>),
        header: None,
    },
    Table {
        path: "images.NAME.zones.ZONE",
        strukt: "ImageZone",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::ImageZone>),
        header: None,
    },
    Table {
        path: "networks.NAME",
        strukt: "Network",
        source: SECTIONS_RS,
        default: None,
        header: None,
    },
    Table {
        path: "create-vm",
        strukt: "CreateVmSection",
        source: SECTIONS_RS,
        default: Some(dbg::<sections::CreateVmSection>),
        header: None,
    },
    Table {
        path: "plugin",
        strukt: "PluginSection",
        source: SECTIONS_RS,
        default: None,
        header: Some("[[plugin]] (one table per plugin)"),
    },
];

/// One key of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// As written in the file (`token-secret-file`).
    pub name: String,
    /// Its field's doc comment, one paragraph.
    pub meaning: String,
    /// Its default as text, `None` when the key must be given.
    pub default: Option<String>,
}

/// The keys of one struct, from its definition in `source`: `pub` fields not skipped by serde.
fn keys_of(source: &str, strukt: &str, default: Option<&str>) -> Vec<Key> {
    let start = format!("pub struct {strukt} {{");
    let Some(at) = source.find(&start) else {
        return Vec::new();
    };
    // The container attributes just above the struct: `#[serde(default, ...)]`.
    let before = &source[..at];
    let attrs_start = before
        .rfind("\n\n")
        .map_or(0, |i| i + 2)
        .max(before.rfind("*/").unwrap_or(0));
    let container_default = before[attrs_start..]
        .lines()
        .any(|l| l.starts_with("#[serde(") && l.contains("default"));
    let defaults = default.map(default_values).unwrap_or_default();
    let mut keys = Vec::new();
    let mut doc = Vec::new();
    let mut field_default = false;
    let mut skipped = false;
    for line in source[at + start.len()..].lines() {
        let l = line.trim();
        if line.starts_with('}') {
            break;
        }
        if let Some(d) = l.strip_prefix("///") {
            doc.push(d.trim().to_owned());
        } else if l.starts_with("#[serde(") {
            let args = l.trim_start_matches("#[serde(").trim_end_matches(")]");
            let args: Vec<&str> = args.split(',').map(str::trim).collect();
            skipped |= args
                .iter()
                .any(|a| *a == "skip" || *a == "skip_deserializing");
            field_default |= args.iter().any(|a| a.starts_with("default"));
        } else if let Some(rest) = l.strip_prefix("pub ") {
            let field = rest.split(':').next().unwrap_or("").trim();
            if !skipped {
                let name = field.replace('_', "-");
                let given = defaults.iter().find(|(f, _)| f == field).map(|(_, v)| v);
                let default = if container_default || field_default {
                    Some(given.cloned().unwrap_or_else(|| "unset".to_owned()))
                } else {
                    None
                };
                keys.push(Key {
                    name,
                    meaning: doc.join(" "),
                    default,
                });
            }
            doc.clear();
            field_default = false;
            skipped = false;
        } else if !l.starts_with("#[") && !l.is_empty() {
            // A private field or anything else: not a key.
            doc.clear();
            field_default = false;
            skipped = false;
        }
    }
    keys
}

/// `(field, value)` of each top-level field in a `{:#?}` rendering, values made readable.
fn default_values(debug: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in debug.lines().skip(1) {
        let is_field = line.len() > 4 && line.starts_with("    ") && !line.starts_with("     ");
        let field = is_field.then(|| line.trim().split_once(": ")).flatten();
        match field {
            Some((name, value)) if name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
                if let Some(done) = current.take() {
                    out.push(done);
                }
                current = Some((name.to_owned(), value.to_owned()));
            }
            _ => {
                if let Some((_, v)) = current.as_mut() {
                    v.push(' ');
                    v.push_str(line.trim());
                }
            }
        }
    }
    out.extend(current);
    out.into_iter()
        .map(|(k, v)| (k, readable(v.trim().trim_end_matches(','))))
        .collect()
}

/// A `Debug` value as the file would write it: `None` unset, `Some(x)` x, `[]` empty, `Size(n)`
/// in binary units, `FreeMemory` as `"free-memory"`.
fn readable(v: &str) -> String {
    let v = v.trim();
    if v == "None" {
        return "unset".to_owned();
    }
    if let Some(inner) = v.strip_prefix("Some(").and_then(|s| s.strip_suffix(')')) {
        return readable(inner);
    }
    if v == "[]" || v == "{}" {
        return "empty".to_owned();
    }
    if let Some(n) = v
        .strip_prefix("Size(")
        .and_then(|s| s.strip_suffix(')'))
        .and_then(|n| n.parse::<u64>().ok())
    {
        return format!("\"{}\"", flxp_core::units::fmt_bytes(n));
    }
    // A newtype (`MethodName("flxp")`): its inner value.
    if let Some((name, inner)) = v.strip_suffix(')').and_then(|s| s.split_once('(')) {
        if name.bytes().all(|b| b.is_ascii_alphanumeric()) && !name.is_empty() {
            return readable(inner.trim().trim_end_matches(','));
        }
    }
    let ident = !v.is_empty()
        && v.bytes().all(|b| b.is_ascii_alphanumeric())
        && v.as_bytes()[0].is_ascii_uppercase();
    if ident {
        let mut kebab = String::new();
        for (i, c) in v.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                kebab.push('-');
            }
            kebab.push(c.to_ascii_lowercase());
        }
        return format!("\"{kebab}\"");
    }
    v.to_owned()
}

/// Every table with its keys: `(path, keys)`.
pub fn tables() -> Vec<(&'static str, Vec<Key>)> {
    TABLES
        .iter()
        .map(|t| {
            let default = t.default.map(|f| f());
            (t.path, keys_of(t.source, t.strukt, default.as_deref()))
        })
        .collect()
}

/// Escapes text for roff: backslashes, hyphens (as `\-`), and a leading `.` or `'`.
pub fn roff(text: &str) -> String {
    let s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The page flxp.toml(5), in roff.
pub fn man_page(version: &str) -> String {
    let mut p = String::new();
    let _ = writeln!(
        p,
        ".TH flxp.toml 5 \"\" \"flxp {}\" \"File Formats\"",
        roff(version)
    );
    p.push_str(".SH NAME\nflxp.toml \\- the configuration file of flxp(1)\n");
    p.push_str(".SH SYNOPSIS\n/etc/flxp/flxp.toml\n");
    p.push_str(
        ".SH DESCRIPTION\nOne TOML file holds the zones (Proxmox VE clusters), placement and \
         balancing settings, limits on migrations, the daemon, the API, node overrides and what \
         createVM needs. Every flxp command reads it: \\fB\\-\\-config\\fR \\fIF\\fR, else \
         \\fBFLXP_CONFIG\\fR, else /etc/flxp/flxp.toml. Every mistake is reported at start with \
         its file, line and column and the key's dotted path; unknown keys are mistakes. \
         \\fBflxp config check\\fR checks the file and each zone.\n.PP\nNAME, ZONE and NODE \
         stand for names you choose (a zone's name, a node's name as Proxmox knows it). Sizes \
         are written \"4GiB\", \"512M\" or in bytes (binary units). Each key below is followed \
         by its default; a key with no default must be given when its table is.\n",
    );
    for (t, (path, keys)) in TABLES.iter().zip(tables()) {
        let header = t.header.map_or(format!("[{path}]"), str::to_owned);
        let _ = writeln!(p, ".SH {}", roff(&header.to_uppercase()));
        let prefix = if path.is_empty() || path == "plugin" || path == "api.tokens" {
            String::new()
        } else {
            format!("{path}.")
        };
        for k in keys {
            let default = match &k.default {
                Some(d) => format!("default: {d}"),
                None => "required".to_owned(),
            };
            let _ = writeln!(
                p,
                ".TP\n\\fB{}\\fR ({})\n{}",
                roff(&format!("{prefix}{}", k.name)),
                roff(&default),
                roff(&k.meaning)
            );
        }
    }
    p.push_str(
        ".SH EXAMPLES\n.nf\n[zones.eu\\-central]\nhosts = [\"pve1.example.com\", \
         \"pve2.example.com:8006\"]\ntoken = \"flxp@pve!flxp\"\ntoken\\-secret\\-file = \
         \"/etc/flxp/eu\\-central.token\"\nfingerprint = \"AA:BB:...\"\n\n[daemon]\n\
         interval\\-secs = 300\n\n[api]\nlisten = \"127.0.0.1:8080\"\ntokens = [{ file = \
         \"/etc/flxp/api.token\" }]\n.fi\n",
    );
    p.push_str(
        ".SH FILES\n.TP\n/etc/flxp/flxp.toml\nThe file (root:flxp, mode 0640: it may hold \
         secrets).\n.TP\n/etc/flxp/*.token\nSecrets the file names (token\\-secret\\-file, \
         api.tokens file), readable by the flxp group only.\n.TP\n\
         /usr/share/doc/flxp/GUIDE.md\nThe admin's guide: what each setting does, with \
         examples.\n",
    );
    p.push_str(".SH SEE ALSO\nflxp(1), flxp\\-config\\-check(1), flxp\\-setup\\-token(1)\n");
    p
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    /// The keys the parser accepts in a table: what serde names after an unknown one.
    fn accepted(path: &str) -> BTreeSet<String> {
        let concrete = path
            .replace("NAME", "x")
            .replace("ZONE", "z")
            .replace("NODE", "n");
        let text = match path {
            "" => "zzz-unknown = 1\n".to_owned(),
            "plugin" => "[[plugin]]\nzzz-unknown = 1\n".to_owned(),
            "api.tokens" => "[api]\ntokens = [{ zzz-unknown = 1 }]\n".to_owned(),
            _ => format!("[{concrete}]\nzzz-unknown = 1\n"),
        };
        let err = Config::parse(&text, Path::new("t.toml")).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("unknown field `zzz-unknown`"),
            "{path}: {message}"
        );
        let expected = message.split_once("expected").unwrap().1;
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_page_lists_every_key_the_parser_accepts_and_no_other() {
        for (path, keys) in tables() {
            let listed: BTreeSet<String> = keys.iter().map(|k| k.name.clone()).collect();
            assert_eq!(listed, accepted(path), "table [{path}]");
            for k in &keys {
                assert!(!k.meaning.is_empty(), "[{path}] {} has no meaning", k.name);
            }
        }
        let page = man_page("0.1.0");
        for (path, keys) in tables() {
            for k in keys {
                let dotted = match path {
                    "" | "plugin" | "api.tokens" => k.name.clone(),
                    _ => format!("{path}.{}", k.name),
                };
                assert!(
                    page.contains(&format!("\\fB{}\\fR", roff(&dotted))),
                    "{dotted}"
                );
            }
        }
    }

    #[test]
    fn defaults_come_from_the_structs_defaults() {
        let all = tables();
        let key = |path: &str, name: &str| {
            all.iter()
                .find(|(p, _)| *p == path)
                .and_then(|(_, ks)| ks.iter().find(|k| k.name == name))
                .unwrap()
                .clone()
        };
        assert_eq!(
            key("daemon", "interval-secs").default.as_deref(),
            Some("300")
        );
        assert_eq!(key("zones.NAME", "hosts").default.as_deref(), Some("empty"));
        assert_eq!(
            key("zones.NAME", "token-secret-file").meaning,
            "File holding the token secret (trailing newline ignored)."
        );
        assert_eq!(key("networks.NAME", "bridge").default, None);
        assert_eq!(
            key("balance", "method").default.as_deref(),
            Some("\"flxp\"")
        );
        assert_eq!(key("balance.trigger", "hold").default.as_deref(), Some("3"));
    }
}

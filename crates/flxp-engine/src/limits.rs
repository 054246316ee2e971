//! How many migrations may run at once: in the zone, into one node, out of one node.
//!
//! [`Slots`] counts the migrations this executor has running and answers whether one more from a
//! source to a target fits the [`Limits`]. It knows nothing of plans; ordering lives in
//! `queue.rs`.

use std::collections::BTreeMap;

use serde::Serialize;

/// Limits on migrations running at the same time (the `[migration]` config table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Migrations at once in a zone.
    pub parallel: u32,
    /// Migrations at once into one node.
    pub per_node_in: u32,
    /// Migrations at once out of one node.
    pub per_node_out: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            parallel: 2,
            per_node_in: 1,
            per_node_out: 1,
        }
    }
}

/// Which limit keeps a migration waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Full {
    /// The zone-wide limit.
    Parallel(u32),
    /// The target's inbound limit.
    Inbound(String, u32),
    /// The source's outbound limit.
    Outbound(String, u32),
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Parallel(n) => write!(f, "{n} migration(s) already run in the zone"),
            Self::Inbound(node, n) => write!(f, "{n} migration(s) already run into {node}"),
            Self::Outbound(node, n) => write!(f, "{n} migration(s) already run out of {node}"),
        }
    }
}

/// The migrations running now, by node.
#[derive(Debug, Clone, Default)]
pub struct Slots {
    running: u32,
    inbound: BTreeMap<String, u32>,
    outbound: BTreeMap<String, u32>,
}

impl Slots {
    /// Whether one more migration from `from` to `to` fits; else the limit that is reached.
    pub fn admits(&self, limits: &Limits, from: &str, to: &str) -> Result<(), Full> {
        // A limit of 0 would block forever; the config refuses it, and here it means 1.
        if self.running >= limits.parallel.max(1) {
            return Err(Full::Parallel(self.running));
        }
        let into = self.inbound.get(to).copied().unwrap_or(0);
        if into >= limits.per_node_in.max(1) {
            return Err(Full::Inbound(to.to_owned(), into));
        }
        let out = self.outbound.get(from).copied().unwrap_or(0);
        if out >= limits.per_node_out.max(1) {
            return Err(Full::Outbound(from.to_owned(), out));
        }
        Ok(())
    }

    /// Counts a migration that starts.
    pub fn take(&mut self, from: &str, to: &str) {
        self.running += 1;
        *self.inbound.entry(to.to_owned()).or_default() += 1;
        *self.outbound.entry(from.to_owned()).or_default() += 1;
    }

    /// Counts a migration that ended.
    pub fn give(&mut self, from: &str, to: &str) {
        self.running = self.running.saturating_sub(1);
        for (map, node) in [(&mut self.inbound, to), (&mut self.outbound, from)] {
            if let Some(n) = map.get_mut(node) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(node);
                }
            }
        }
    }

    /// Migrations running now.
    pub fn running(&self) -> u32 {
        self.running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_is_named_when_reached() {
        let limits = Limits {
            parallel: 3,
            per_node_in: 1,
            per_node_out: 2,
        };
        let mut s = Slots::default();
        assert_eq!(s.admits(&limits, "a", "b"), Ok(()));
        s.take("a", "b");
        assert_eq!(
            s.admits(&limits, "a", "b"),
            Err(Full::Inbound("b".into(), 1))
        );
        assert_eq!(s.admits(&limits, "a", "c"), Ok(()));
        s.take("a", "c");
        assert_eq!(
            s.admits(&limits, "a", "d"),
            Err(Full::Outbound("a".into(), 2))
        );
        s.take("x", "y");
        assert_eq!(s.admits(&limits, "p", "q"), Err(Full::Parallel(3)));
        assert_eq!(
            Full::Inbound("pve2".into(), 1).to_string(),
            "1 migration(s) already run into pve2"
        );
    }

    #[test]
    fn ended_migrations_free_their_slots() {
        let limits = Limits::default();
        let mut s = Slots::default();
        s.take("a", "b");
        s.take("c", "d");
        assert!(s.admits(&limits, "e", "f").is_err());
        s.give("a", "b");
        assert_eq!(s.running(), 1);
        assert_eq!(s.admits(&limits, "a", "b"), Ok(()));
        s.give("c", "d");
        s.give("c", "d");
        assert_eq!(s.running(), 0, "never below zero");
    }

    #[test]
    fn a_zero_limit_still_lets_one_run() {
        let limits = Limits {
            parallel: 0,
            per_node_in: 0,
            per_node_out: 0,
        };
        assert_eq!(Slots::default().admits(&limits, "a", "b"), Ok(()));
    }
}

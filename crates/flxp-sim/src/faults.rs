//! Injected faults: extra latency and error answers on chosen API paths, and guests whose
//! migrations fail. Error rates draw from a seeded generator, so a scenario fails the same
//! requests on every run.

use crate::scenario::FaultSpec;
use crate::{ApiError, Error, Result};

/// The faults in force and the generator their rates draw from.
#[derive(Debug, Clone)]
pub struct Faults {
    spec: FaultSpec,
    state: u64,
}

impl Faults {
    /// Faults from a spec (already checked), drawing from `seed`.
    pub fn new(spec: FaultSpec, seed: u64) -> Self {
        Faults { spec, state: seed }
    }

    /// The faults in force.
    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// Replaces the faults in force.
    pub fn set(&mut self, spec: FaultSpec) {
        self.spec = spec;
    }

    /// Extra latency for a request, milliseconds (matching entries add up).
    pub fn latency_ms(&self, method: &str, path: &str) -> u64 {
        self.spec
            .latency
            .iter()
            .filter(|f| method_matches(f.method.as_deref(), method) && glob_match(&f.path, path))
            .map(|f| f.ms)
            .fold(0u64, u64::saturating_add)
    }

    /// The error to answer instead of a request, if a matching fault fires this time.
    pub fn error_for(&mut self, method: &str, path: &str) -> Option<ApiError> {
        let hit = self
            .spec
            .errors
            .iter()
            .find(|f| method_matches(f.method.as_deref(), method) && glob_match(&f.path, path))
            .cloned()?;
        (self.next_unit() < hit.rate).then(|| ApiError::new(hit.status, hit.message))
    }

    /// The exit status a migration of `vmid` fails with, if it is set to fail.
    pub fn migration_failure(&self, vmid: u32) -> Option<String> {
        self.spec
            .fail_migrations
            .iter()
            .find(|f| f.vmid == vmid)
            .map(|f| {
                f.message
                    .clone()
                    .unwrap_or_else(|| "migration problems".into())
            })
    }

    /// Whether `node` is set to fail its boot (stay offline after a reboot or a wake).
    pub fn boot_fails(&self, node: &str) -> bool {
        self.spec.fail_boots.iter().any(|n| n == node)
    }

    /// splitmix64, scaled to [0, 1).
    fn next_unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn method_matches(want: Option<&str>, got: &str) -> bool {
    want.is_none_or(|w| w.eq_ignore_ascii_case(got))
}

/// Glob match where `*` matches any run of characters (including `/`).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Checks a fault spec; `at` is the path prefix errors name (`sim.faults`).
pub fn check(spec: &FaultSpec, at: &str) -> Result<()> {
    for (i, f) in spec.errors.iter().enumerate() {
        if !(0.0..=1.0).contains(&f.rate) || f.rate.is_nan() {
            return Err(Error::scenario(
                format!("{at}.errors[{i}].rate"),
                format!("must be between 0 and 1, got {}", f.rate),
            ));
        }
        if !(400..=599).contains(&f.status) {
            return Err(Error::scenario(
                format!("{at}.errors[{i}].status"),
                format!("must be an HTTP error status 400..599, got {}", f.status),
            ));
        }
        if !f.path.starts_with('/') {
            return Err(Error::scenario(
                format!("{at}.errors[{i}].path"),
                "must start with '/' (the API path after /api2/json)",
            ));
        }
    }
    for (i, f) in spec.latency.iter().enumerate() {
        if f.ms > 600_000 {
            return Err(Error::scenario(
                format!("{at}.latency[{i}].ms"),
                "must be at most 600000 ms",
            ));
        }
        if !f.path.starts_with('/') {
            return Err(Error::scenario(
                format!("{at}.latency[{i}].path"),
                "must start with '/' (the API path after /api2/json)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ErrorFault, FailMigration, LatencyFault};

    #[test]
    fn globs_match_across_slashes() {
        assert!(glob_match(
            "/nodes/*/qemu/*/migrate",
            "/nodes/pve1/qemu/100/migrate"
        ));
        assert!(glob_match("/cluster/*", "/cluster/ha/status/current"));
        assert!(glob_match("*", "/x"));
        assert!(!glob_match("/nodes/*/qemu", "/nodes/pve1/lxc"));
        assert!(glob_match("/version", "/version"));
        assert!(!glob_match("/version", "/versions"));
    }

    #[test]
    fn rates_are_deterministic_and_proportional() {
        let spec = FaultSpec {
            errors: vec![ErrorFault {
                path: "/cluster/resources".into(),
                method: Some("GET".into()),
                rate: 0.25,
                status: 503,
                message: "busy".into(),
            }],
            latency: vec![LatencyFault {
                path: "/cluster/*".into(),
                method: None,
                ms: 20,
            }],
            fail_migrations: vec![FailMigration {
                vmid: 105,
                message: None,
            }],
            fail_boots: vec!["pve3".into()],
        };
        let mut a = Faults::new(spec.clone(), 7);
        let mut b = Faults::new(spec, 7);
        let hits_a: Vec<bool> = (0..1000)
            .map(|_| a.error_for("GET", "/cluster/resources").is_some())
            .collect();
        let hits_b: Vec<bool> = (0..1000)
            .map(|_| b.error_for("GET", "/cluster/resources").is_some())
            .collect();
        assert_eq!(hits_a, hits_b);
        let n = hits_a.iter().filter(|h| **h).count();
        assert!((200..300).contains(&n), "{n}");
        assert!(a.error_for("POST", "/cluster/resources").is_none());
        assert_eq!(a.latency_ms("GET", "/cluster/resources"), 20);
        assert_eq!(
            a.migration_failure(105).as_deref(),
            Some("migration problems")
        );
        assert_eq!(a.migration_failure(106), None);
        assert!(a.boot_fails("pve3"));
        assert!(!a.boot_fails("pve2"));
    }
}

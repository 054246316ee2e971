//! `GET /version` and `GET /nodes/{node}/version`.

use serde::{Deserialize, Serialize};

use flxp_core::lenient;

/// The Proxmox VE version of the answering node (`release` gates PVE-9-only features).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Version {
    /// Full version, e.g. `9.2.11`.
    pub version: Option<String>,
    /// Release, e.g. `9.2`.
    pub release: Option<String>,
    /// Git commit id of pve-manager (8 to 64 hex digits).
    pub repoid: Option<String>,
    /// Default console viewer (`applet`, `vv`, `html5`, `xtermjs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console: Option<String>,
}

impl Version {
    /// The major release number (`9` for `9.2`), if `release` or `version` holds one.
    pub fn major(&self) -> Option<u32> {
        let text = self.release.as_deref().or(self.version.as_deref())?;
        text.split('.').next()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::Version;

    #[test]
    fn reads_the_reference_shape_and_writes_it_back() {
        let json = r#"{"version":"9.2.11","release":"9.2","repoid":"3a6b1f0c"}"#;
        let v: Version = serde_json::from_str(json).unwrap();
        assert_eq!(v.major(), Some(9));
        assert_eq!(serde_json::to_string(&v).unwrap(), json);
    }
}

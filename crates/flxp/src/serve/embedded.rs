//! The embedded default: with no config file, `flxp serve` runs on a simulated zone so a newcomer
//! can try it at once. The simulator (`Scenario::demo()`: four nodes, about twenty guests, the
//! cloud-init template 9000 `ubuntu-2404` on shared `ceph`) serves HTTPS on a free loopback port,
//! and the zone `sim` pins its certificate. Its profiles, image and network have fixed names so
//! examples and scripts can rely on them: compute profiles `small`, `medium`, `large`, storage
//! profile `standard`, image `ubuntu-2404`, network `100`.

use std::path::Path;

use anyhow::Context;
use flxp_sim::auth::TokenSpec;
use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};

use crate::config::Config;

/// The name of the embedded zone.
pub const ZONE: &str = "sim";

/// A real (public) ed25519 key for the printed example request; its private half was deleted.
pub const EXAMPLE_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDFkLyOVoSrwEOe/Cu8ginHKAlfTmvX5GwdqB8dB9MYm flxp@example";

/// The running simulator and the config that points at it.
pub struct Embedded {
    /// The simulator, until shut down.
    pub handle: SimHandle,
    /// The config of the `sim` zone and its catalog.
    pub config: Config,
    /// How to reach the simulator's own API: base URL, fingerprint and `Authorization` value.
    pub access: SimAccess,
}

#[cfg(test)]
impl Embedded {
    /// From now on the simulator answers `GET path` with Proxmox's error `status` and
    /// `message` (the tests' unreachable or refusing zone).
    pub fn fail_get(&self, path: &str, status: u16, message: &str) {
        use flxp_sim::scenario::{ErrorFault, FaultSpec};
        self.handle.sim().world().faults.set(FaultSpec {
            errors: vec![ErrorFault::get(path, status, message)],
            ..FaultSpec::default()
        });
    }

    /// A client of the embedded zone.
    pub fn client(&self) -> flxp_pve::Client {
        self.config
            .client(ZONE)
            .expect("the config start() built names the zone")
    }
}

/// How to reach the simulated Proxmox API itself, to look at what flxp did there.
#[derive(Debug, Clone)]
pub struct SimAccess {
    /// `https://127.0.0.1:PORT/api2/json`.
    pub url: String,
    /// SHA-256 fingerprint of its certificate.
    pub fingerprint: String,
    /// `PVEAPIToken=...` for the `Authorization` header.
    pub authorization: String,
}

/// The catalog of the embedded zone (everything but the zone's address and credentials).
pub const CATALOG: &str = r#"
[compute-profiles.small]
cores = 1
memory = "1GiB"

[compute-profiles.medium]
cores = 2
memory = "4GiB"

[compute-profiles.large]
cores = 4
memory = "8GiB"

[storage-profiles.standard]
storage = "ceph"
disk = "32GiB"

[images.ubuntu-2404]
template = 9000

[networks."100"]
bridge = "vmbr0"
vlan = 100

[create-vm]
poll-ms = 250
"#;

/// Starts the simulator on a free loopback port and builds the config of zone `sim`.
pub async fn start() -> anyhow::Result<Embedded> {
    let mut scenario = Scenario::demo();
    let token = TokenSpec::generate("root@pam", "flxp");
    scenario.add_token(&token.to_spec_string())?;
    let identity = TlsIdentity::generate(&["127.0.0.1".to_owned(), "localhost".to_owned()])
        .context("generating the simulator's certificate")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the simulator to a loopback port")?;
    let sim = Sim::new(scenario).context("starting the simulated cluster")?;
    let handle = SimHandle::spawn(listener, sim, Some(&identity))?;
    let fingerprint = handle.fingerprint().unwrap_or_default().to_owned();
    let text = format!(
        "[zones.{ZONE}]\nhosts = [\"{}\"]\ntoken = \"{}\"\ntoken-secret = \"{}\"\nfingerprint = \"{fingerprint}\"\n{CATALOG}",
        handle.addr(),
        token.full_id(),
        token.secret,
    );
    let config = Config::parse(&text, Path::new("<embedded>"))
        .map_err(|e| anyhow::anyhow!("the embedded config is broken: {e}"))?;
    let access = SimAccess {
        url: handle.base_url(),
        fingerprint,
        authorization: format!("PVEAPIToken={}={}", token.full_id(), token.secret),
    };
    Ok(Embedded {
        handle,
        config,
        access,
    })
}

/// The banner printed on stderr: loud about the simulation, with the URL, the token and a
/// ready-to-paste request.
pub fn banner(url: &str, token: &str, generated: bool, sim: &SimAccess) -> String {
    let query = format!(
        "mutation {{ createVM(zone: \\\"{ZONE}\\\", name: \\\"web-server\\\", options: {{ image: \\\"ubuntu-2404\\\", computeProfile: \\\"medium\\\", storageProfile: \\\"standard\\\", sshPublicKey: \\\"{EXAMPLE_KEY}\\\", interfaces: [{{ network: \\\"100\\\" }}], user: \\\"admin\\\", password: \\\"initial-password\\\", backup: false }}) {{ id name host {{ id name }} }} }}"
    );
    let token_note = if generated {
        "generated; set FLXP_API_TOKEN to choose one"
    } else {
        "from FLXP_API_TOKEN"
    };
    let header = sh_quote(&format!("Authorization: Bearer {token}"));
    let sim_header = sh_quote(&format!("Authorization: {}", sim.authorization));
    let sim_url = &sim.url;
    let fingerprint = &sim.fingerprint;
    format!(
        "\
==================================================================================
  SIMULATED CLUSTER: no config file was found, so flxp runs on a built-in
  simulated Proxmox VE zone \"{ZONE}\" (4 nodes, demo guests). Nothing real is touched.
  To manage real clusters, write /etc/flxp/flxp.toml or pass --config FILE.
==================================================================================
  Dashboard:    {url}/   (open it in a browser; log in with the API token)
  GraphQL API:  {url}/graphql   (GraphiQL: open it in a browser)
  API token:    {token}   ({token_note})
  Metrics:      {url}/metrics
  Simulator:    {sim_url}   (its own Proxmox API; certificate {fingerprint})
                curl -sk {sim_url}/cluster/resources -H {sim_header}
  Profiles:     compute small|medium|large, storage standard, image ubuntu-2404, network 100

  Try it:
curl -s {url}/graphql \\
  -H {header} \\
  -H 'Content-Type: application/json' \\
  -d '{{\"query\": \"{query}\"}}'
"
    )
}

/// One shell word: single-quoted, with any single quote inside written as `'\''`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[test]
    fn the_catalog_has_the_names_scripts_rely_on() {
        let text = format!(
            "[zones.{ZONE}]\nhosts = [\"127.0.0.1:1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"x\"\n{CATALOG}"
        );
        let c = Config::parse(&text, Path::new("t")).unwrap();
        assert_eq!(c.compute_profiles["small"].memory.0, 1 << 30);
        assert_eq!(c.compute_profiles["medium"].cores, 2);
        assert_eq!(c.compute_profiles["medium"].memory.0, 4 << 30);
        assert_eq!(c.compute_profiles["large"].memory.0, 8 << 30);
        assert_eq!(c.storage_profiles["standard"].storage, "ceph");
        assert_eq!(c.storage_profiles["standard"].disk.0, 32 << 30);
        assert_eq!(c.images["ubuntu-2404"].template, Some(9000));
        assert_eq!(c.networks["100"].vlan, Some(100));
        flxp_engine::create_vm::check_ssh_key(EXAMPLE_KEY).unwrap();
    }

    #[test]
    fn the_banner_request_is_valid_json() {
        let b = banner("http://127.0.0.1:8080", "tok", true, &sim());
        let body = b
            .split("-d '")
            .nth(1)
            .unwrap()
            .trim_end()
            .trim_end_matches('\'');
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let q = v["query"].as_str().unwrap();
        assert!(q.starts_with("mutation { createVM(zone: \"sim\""), "{q}");
        assert!(b.contains("SIMULATED"));
    }

    #[test]
    fn a_token_from_the_environment_is_printed_ready_to_paste() {
        // The banner prints the token in use, whoever chose it, so the curl works as is.
        let b = banner("http://127.0.0.1:8080", "my-own-t0ken", false, &sim());
        assert!(
            b.contains("API token:    my-own-t0ken   (from FLXP_API_TOKEN)"),
            "{b}"
        );
        assert!(b.contains("-H 'Authorization: Bearer my-own-t0ken'"), "{b}");
        // The simulator's own API is reachable from what the banner says.
        assert!(b.contains("certificate AA:BB"), "{b}");
        assert!(
            b.contains("curl -sk https://127.0.0.1:1/api2/json/cluster/resources -H 'Authorization: PVEAPIToken=root@pam!flxp=s3cret'"),
            "{b}"
        );
    }

    #[test]
    fn a_token_with_a_quote_still_pastes_as_one_shell_word() {
        let b = banner("http://127.0.0.1:8080", "it's-mine", false, &sim());
        assert!(
            b.contains(r"-H 'Authorization: Bearer it'\''s-mine' \"),
            "{b}"
        );
        // What a POSIX shell makes of the word is the header itself.
        let word = sh_quote("Authorization: Bearer it's-mine");
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {word}")])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "Authorization: Bearer it's-mine"
        );
    }

    fn sim() -> SimAccess {
        SimAccess {
            url: "https://127.0.0.1:1/api2/json".into(),
            fingerprint: "AA:BB".into(),
            authorization: "PVEAPIToken=root@pam!flxp=s3cret".into(),
        }
    }
}

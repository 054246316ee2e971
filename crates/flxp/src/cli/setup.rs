//! `flxp setup token`: the `pveum` commands that create a least-privilege user, role, ACL and
//! API token for the chosen features (from the same definition `config check` verifies).

use std::collections::BTreeSet;
use std::process::ExitCode;

use flxp_pve::privileges::{Feature, pveum_commands, requirements, role_name, with_implied};

/// The subcommands of `flxp setup`.
#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Print the pveum commands that create flxp's user, role, ACL and API token.
    Token(TokenArgs),
}

/// Arguments of `flxp setup token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// What the token is for (read is always included).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "balance")]
    features: Vec<FeatureArg>,
    /// The Proxmox user to create.
    #[arg(long, default_value = "flxp@pve")]
    user: String,
    /// The token's name.
    #[arg(long, default_value = "flxp")]
    token_name: String,
}

/// `--features` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FeatureArg {
    /// Status, plans, snapshots, place.
    Read,
    /// Rebalancing and evacuation (live migrations).
    Balance,
    /// createVM.
    Create,
    /// Consolidation switching freed nodes off and waking them (brings balance).
    Power,
}

impl From<FeatureArg> for Feature {
    fn from(f: FeatureArg) -> Self {
        match f {
            FeatureArg::Read => Feature::Read,
            FeatureArg::Balance => Feature::Balance,
            FeatureArg::Create => Feature::Create,
            FeatureArg::Power => Feature::Power,
        }
    }
}

/// Runs `flxp setup ...`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args::Token(a) = args;
    let chosen: BTreeSet<Feature> = a.features.into_iter().map(Feature::from).collect();
    let features = with_implied(&chosen);
    flxp_pve::validate_token_id(&format!("{}!{}", a.user, a.token_name))
        .map_err(|e| super::UsageError(e.to_string()))?;
    let say = crate::output::say;
    say(format!(
        "# Role {} for: {}. Run as root on any node of the cluster.",
        role_name(&features),
        features
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for r in requirements(&features) {
        say(format!(
            "#   {:<24} on {:<11} {}",
            r.privilege, r.path, r.why
        ));
    }
    for cmd in pveum_commands(&features, &a.user, &a.token_name) {
        say(cmd);
    }
    say(
        "# Put the printed secret in /etc/flxp/<zone>.token (mode 0640, group flxp) and set"
            .to_owned(),
    );
    say(format!(
        "# token = \"{}!{}\" and token-secret-file in the zone; then run `flxp config check`.",
        a.user, a.token_name
    ));
    Ok(ExitCode::SUCCESS)
}

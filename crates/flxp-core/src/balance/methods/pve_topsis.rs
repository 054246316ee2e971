//! `pve-topsis`: Proxmox's `topsis` auto-rebalance selection (see `pve.rs`).

use super::super::pve::{self, Ranking};
use super::{Builtin, MethodName};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin(&METHOD);

/// How it ranks moves, for [`pve::rank_moves`] and [`pve::run_until_stable`].
pub const RANKING: Ranking = Ranking::Topsis;

/// One round of Proxmox's TOPSIS selection.
pub static METHOD: Builtin = Builtin {
    name: "pve-topsis",
    description: "Proxmox's topsis auto-rebalance selection: the single move TOPSIS ranks best",
    plan: |input, options| pve::plan(input, options, RANKING),
    reads_usage: true,
};

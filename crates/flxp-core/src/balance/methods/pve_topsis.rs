//! `pve-topsis`: Proxmox's `topsis` auto-rebalance selection (see `pve.rs`).

use super::super::pve::{self, Ranking};
use super::{Builtin, MethodName};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin("pve-topsis");

/// One round of Proxmox's TOPSIS selection.
pub static METHOD: Builtin = Builtin {
    name: NAME,
    description: "Proxmox's topsis auto-rebalance selection: the single move TOPSIS ranks best",
    plan: |i, options| pve::plan(i.cluster, i.rules, i.state, i.placer, options, Ranking::Topsis),
};

//! `pve-bruteforce`: Proxmox's `bruteforce` auto-rebalance selection (see `pve.rs`).

use super::super::pve::{self, Ranking};
use super::{Builtin, MethodName};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin(&METHOD);

/// How it ranks moves, for [`pve::rank_moves`] and [`pve::run_until_stable`].
pub const RANKING: Ranking = Ranking::Bruteforce;

/// One round of Proxmox's bruteforce selection.
pub static METHOD: Builtin = Builtin {
    name: "pve-bruteforce",
    description: "Proxmox's bruteforce auto-rebalance selection: the single move with the lowest CV",
    plan: |input, options| pve::plan(input, options, RANKING),
    reads_usage: true,
};

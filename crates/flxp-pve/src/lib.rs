//! flxp-pve (work in progress).

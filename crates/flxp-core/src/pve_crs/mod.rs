//! Proxmox's cluster resource scheduler (TOPSIS scoring, imbalance, single-move balancing), reimplemented (being built).

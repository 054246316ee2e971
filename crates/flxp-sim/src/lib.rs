//! flxp-sim (work in progress).

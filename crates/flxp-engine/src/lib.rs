//! flxp-engine (work in progress).

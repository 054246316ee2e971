//! End-to-end tests of the flxp binary.

//! Public-API tests of flxp-core.

//! Rendering of decisions: aligned tables for people, one JSON document for `--json`.

//! A config file of any text: parsed and checked. Errors must name file and line; a panic is a
//! bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = flxp::config::Config::parse(text, std::path::Path::new("fuzz.toml"));
});

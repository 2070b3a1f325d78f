//! The card-number detector takes any text and any JSON without panicking, and finds a
//! known card number wherever it is put into the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use payorch::http::card_data::{contains_card_number, find_card_number};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = contains_card_number(&text);
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = find_card_number(&value);
    }
    // A card number between letters is found, whatever surrounds it.
    let planted = format!("{text}x4242424242424242x{text}");
    assert!(contains_card_number(&planted), "{planted:?}");
});

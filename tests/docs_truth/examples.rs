//! The docs' examples have the shape payorch sends: a delivery's body has the event's
//! members (the `Event` schema of /openapi.json, which `GET /v1/events/{id}` answers with),
//! and a time is a string (RFC 3339), never a number.

use std::collections::BTreeSet;

use payorch::http::api::ApiDoc;
use payorch::http::openapi;
use utoipa::OpenApi;

use crate::markdown::{code_blocks, page, section};

/// The section whose example is a delivery's body, and what marks it among its blocks.
/// The merchant's guide to events, where a delivery's example is.
const PAGE: &str = "docs/guides/events.md";
const DELIVERY: &str = "What a delivery is";
const EVENT_MARK: &str = "\"object\": \"event\"";

/// The members of a JSON-like example at its top level (`…` where values are left out).
fn top_level_members(example: &str) -> Vec<(String, String)> {
    let mut members = Vec::new();
    let mut depth = 0;
    let mut chars = example.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            '"' => {
                let end = example[i + 1..]
                    .find('"')
                    .map_or(example.len(), |e| i + 1 + e);
                let name = &example[i + 1..end];
                while chars.peek().is_some_and(|(j, _)| *j <= end) {
                    chars.next();
                }
                let after = example[end + 1..].trim_start();
                if depth == 1 {
                    if let Some(value) = after.strip_prefix(':') {
                        members.push((name.to_string(), value.trim_start().to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    members
}

#[test]
fn a_deliverys_example_has_the_events_members_and_times_as_text() {
    let doc = openapi::document(ApiDoc::openapi());
    let schema = &doc["components"]["schemas"]["Event"];
    let properties = schema["properties"]
        .as_object()
        .expect("/openapi.json has the Event schema");
    let guide = page(PAGE);
    let delivery =
        section(&guide, DELIVERY).unwrap_or_else(|| panic!("{PAGE} has no section \"{DELIVERY}\""));
    let example = code_blocks(delivery.text)
        .into_iter()
        .find(|block| block.contains(EVENT_MARK))
        .unwrap_or_else(|| {
            panic!(
                "{PAGE}:{}: no example of a delivery's body ({EVENT_MARK})",
                delivery.first_line
            )
        });
    let members = top_level_members(&example);
    let shown: BTreeSet<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    let sent: BTreeSet<&str> = properties.keys().map(String::as_str).collect();
    let at = delivery.first_line;
    let mut problems = Vec::new();
    for missing in sent.difference(&shown) {
        problems.push(format!(
            "{PAGE}:{at}: the delivery's example lacks `{missing}`, which every event has"
        ));
    }
    for extra in shown.difference(&sent) {
        problems.push(format!(
            "{PAGE}:{at}: the delivery's example shows `{extra}`, which no event has: \
             remove it"
        ));
    }
    for (name, value) in &members {
        let is_time = properties
            .get(name)
            .is_some_and(|p| p["format"] == "date-time");
        if is_time && !value.starts_with('"') {
            problems.push(format!(
                "{PAGE}:{at}: `{name}` is sent as RFC 3339 text (\"2026-11-24T10:00:00.123456Z\"), \
                 the example shows {}",
                value.split([',', '\n']).next().unwrap_or(value)
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn an_examples_members_are_read_at_its_top_level_only() {
    let members = top_level_members(r#"{"a": 1, "b": {"c": "x,y"}, "d": [{"e": 2}], "f": "…"}"#);
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b", "d", "f"]);
    assert_eq!(
        members[0].1,
        "1, \"b\": {\"c\": \"x,y\"}, \"d\": [{\"e\": 2}], \"f\": \"…\"}"
    );
}

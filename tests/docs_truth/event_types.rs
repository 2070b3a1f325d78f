//! The event types the docs list are those payorch sends (`EventType::ALL`, the database's
//! `event_type` domain by tests/api/schema_mirrors.rs).

use std::collections::BTreeSet;

use payorch::events::EventType;

use crate::markdown::{code_spans, pages, tables_headed};

const HEADER: [&str; 2] = ["event type", "sent when"];

#[test]
fn the_event_table_lists_every_type_sent_and_no_other() {
    let pages = pages();
    let tables = tables_headed(&pages, &HEADER);
    assert!(
        !tables.is_empty(),
        "no table headed `| event type | sent when |` in README.md or docs/: the merchant's \
         list of event types (docs/guides/events.md, \"Events and webhook endpoints\") is checked there"
    );
    let sent: BTreeSet<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    let mut problems = Vec::new();
    for (page, table) in &tables {
        let mut listed = BTreeSet::new();
        for row in &table.rows {
            let named = code_spans(&row.cells[0]);
            if named.len() != 1 || row.cells[1].is_empty() {
                problems.push(format!(
                    "{}:{}: a row names one type in backticks and says when it is sent",
                    page.path, row.line
                ));
            }
            for name in named {
                if !sent.contains(name) {
                    problems.push(format!(
                        "{}:{}: `{name}` is no type payorch sends (EventType): remove the row",
                        page.path, row.line
                    ));
                }
                listed.insert(name);
            }
        }
        for missing in sent.difference(&listed) {
            problems.push(format!(
                "{}:{}: add a row `| `{missing}` | <when it is sent> |` (EventType says it is sent)",
                page.path, table.line
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

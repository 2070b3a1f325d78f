//! The error codes the docs list are those payorch answers (`ApiError::CODES`, held to
//! `ApiError::code` by its unit test), each with its status and what to do.

use std::collections::{BTreeMap, BTreeSet};

use payorch::http::errors::ApiError;

use crate::markdown::{code_spans, pages, tables_headed};

const HEADER: [&str; 3] = ["code", "status", "what to do"];

#[test]
fn the_error_table_lists_every_code_with_its_status_and_what_to_do() {
    let pages = pages();
    let tables = tables_headed(&pages, &HEADER);
    assert!(
        !tables.is_empty(),
        "no table headed `| code | status | what to do |` in README.md or docs/: the list of \
         every problem `code` payorch answers is checked there"
    );
    let codes: BTreeMap<&str, u16> = ApiError::CODES.into_iter().collect();
    let mut problems = Vec::new();
    for (page, table) in &tables {
        let mut listed = BTreeSet::new();
        for row in &table.rows {
            let [code, status, what] = &row.cells[..] else {
                problems.push(format!("{}:{}: a row has three cells", page.path, row.line));
                continue;
            };
            let named = code_spans(code);
            let [name] = named[..] else {
                problems.push(format!(
                    "{}:{}: a row names one code, in backticks",
                    page.path, row.line
                ));
                continue;
            };
            match codes.get(name) {
                None => problems.push(format!(
                    "{}:{}: `{name}` is no code payorch answers (ApiError::CODES): remove the row",
                    page.path, row.line
                )),
                Some(expected) if status.trim_matches('`') != expected.to_string() => problems
                    .push(format!(
                        "{}:{}: `{name}` is answered with status {expected}, not {status}",
                        page.path, row.line
                    )),
                Some(_) => {}
            }
            if what.is_empty() {
                problems.push(format!(
                    "{}:{}: say what a client does about `{name}`",
                    page.path, row.line
                ));
            }
            if !listed.insert(name) {
                problems.push(format!("{}:{}: `{name}` twice", page.path, row.line));
            }
        }
        for (missing, status) in codes.iter().filter(|(c, _)| !listed.contains(*c)) {
            problems.push(format!(
                "{}:{}: add a row `| `{missing}` | {status} | <what a client does> |` \
                 (ApiError::CODES says payorch answers it)",
                page.path, table.line
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Where the docs write a status beside one of payorch's codes (`409 order_not_payable`),
/// it is that code's status. Other codes (the sandbox's, Stripe's) are not payorch's.
#[test]
fn a_status_written_beside_a_code_is_its_status() {
    let codes: BTreeMap<&str, u16> = ApiError::CODES.into_iter().collect();
    let mut problems = Vec::new();
    for page in pages() {
        for (i, line) in page.text.lines().enumerate() {
            for span in code_spans(line) {
                let Some((status, code)) = span.split_once(' ') else {
                    continue;
                };
                let (Ok(status), Some(expected)) = (status.parse::<u16>(), codes.get(code)) else {
                    continue;
                };
                if status != *expected {
                    problems.push(format!(
                        "{}:{}: `{span}`: payorch answers `{code}` with {expected}",
                        page.path,
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

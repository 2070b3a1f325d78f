//! docs/guides/declines.md held to the vocabulary: every code of `DeclineCode::ALL` listed
//! once with its class, and every row of the mapping tables true of the functions that map
//! (`providers::stripe::decline`, `providers::adyen::decline`), each table listing every
//! entry of the code's own table.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use payorch::providers::adyen;
use payorch::providers::decline::{Advice, Decline, DeclineCode};
use payorch::providers::stripe;
use serde_json::Value;

use crate::markdown::{code_spans, page, tables_headed, Page, Table};

const PAGE: &str = "docs/guides/declines.md";

/// The one table of the page headed `header`.
fn table(page: &Page, header: &[&str]) -> Table {
    let mut found = tables_headed(std::slice::from_ref(page), header);
    assert_eq!(
        found.len(),
        1,
        "{PAGE}: one table headed `| {} |`",
        header.join(" | ")
    );
    found.remove(0).1
}

#[test]
fn the_code_table_lists_every_code_once_with_its_class() {
    let page = page(PAGE);
    let table = table(&page, &["code", "class", "meaning", "what to do"]);
    let mut problems = Vec::new();
    let mut listed = HashSet::new();
    for row in &table.rows {
        let [code, class, meaning, what] = &row.cells[..] else {
            problems.push(format!("{PAGE}:{}: a row has four cells", row.line));
            continue;
        };
        let Some(ours) = code_spans(code).first().and_then(|c| DeclineCode::parse(c)) else {
            problems.push(format!(
                "{PAGE}:{}: {code} is no DeclineCode: remove the row",
                row.line
            ));
            continue;
        };
        if class != ours.class().as_str() {
            problems.push(format!(
                "{PAGE}:{}: `{}` is {}, not {class}",
                row.line,
                ours.as_str(),
                ours.class().as_str()
            ));
        }
        if meaning.is_empty() || what.is_empty() {
            problems.push(format!(
                "{PAGE}:{}: say what `{}` means and what to do",
                row.line,
                ours.as_str()
            ));
        }
        if !listed.insert(ours) {
            problems.push(format!("{PAGE}:{}: `{}` twice", row.line, ours.as_str()));
        }
    }
    for missing in DeclineCode::ALL.iter().filter(|c| !listed.contains(c)) {
        problems.push(format!(
            "{PAGE}:{}: add a row for `{}` ({})",
            table.line,
            missing.as_str(),
            missing.class().as_str()
        ));
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Every raw code of a mapping table with the decline it must give, and the entries of the
/// code's table the page must list.
fn check_mapping(
    header: &str,
    map: impl Fn(&str) -> Decline,
    entries: &[(&str, DeclineCode)],
) -> Vec<String> {
    let page = page(PAGE);
    let table = table(&page, &[header, "code", "class"]);
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for row in &table.rows {
        let [raws, code, class] = &row.cells[..] else {
            problems.push(format!("{PAGE}:{}: a row has three cells", row.line));
            continue;
        };
        let code = code_spans(code).first().copied().unwrap_or_default();
        for raw in code_spans(raws) {
            let decline = map(raw);
            if decline.code.as_str() != code || decline.class.as_str() != class {
                problems.push(format!(
                    "{PAGE}:{}: {header} `{raw}` gives `{}` {}, not `{code}` {class}",
                    row.line,
                    decline.code.as_str(),
                    decline.class.as_str()
                ));
            }
            if !listed.insert(raw.to_owned()) {
                problems.push(format!("{PAGE}:{}: `{raw}` twice", row.line));
            }
        }
    }
    for (raw, _) in entries.iter().filter(|(r, _)| !listed.contains(*r)) {
        problems.push(format!(
            "{PAGE}:{}: the {header} table lacks `{raw}`",
            table.line
        ));
    }
    problems
}

fn additional(field: &str, value: &str) -> BTreeMap<String, Value> {
    BTreeMap::from([(field.to_owned(), Value::from(value))])
}

#[test]
fn every_mapping_row_is_what_the_adapters_do() {
    let card = || Advice::default();
    let mut problems = check_mapping(
        "Stripe decline_code",
        |raw| stripe::decline("card_error", Some("card_declined"), Some(raw), card()),
        stripe::BY_DECLINE_CODE,
    );
    problems.extend(check_mapping(
        "Stripe code, without a decline_code",
        |raw| stripe::decline("card_error", Some(raw), None, card()),
        stripe::BY_CODE,
    ));
    problems.extend(check_mapping(
        "Adyen refusalReasonCode",
        |raw| adyen::decline(Some(raw), &BTreeMap::new()),
        adyen::BY_REFUSAL,
    ));
    problems.extend(check_mapping(
        "Adyen inferredRefusalReason",
        |raw| adyen::decline(Some("2"), &additional("inferredRefusalReason", raw)),
        adyen::BY_INFERRED,
    ));
    problems.extend(check_mapping(
        "Adyen refusalReasonRaw",
        |raw| adyen::decline(Some("5"), &additional("refusalReasonRaw", raw)),
        adyen::BY_RAW,
    ));
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

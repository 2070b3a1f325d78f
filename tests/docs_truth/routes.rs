//! The API table is the OpenAPI document's operations (`http::api`'s list), each once, and
//! every route a table of the docs names is served.

use std::collections::BTreeSet;

use payorch::http::api::ApiDoc;
use payorch::http::openapi;
use utoipa::OpenApi;

use crate::markdown::{code_spans, page, pages, section, tables, tables_headed};

const HEADER: [&str; 3] = ["method and path", "who", "what"];
/// The section whose table is the whole API.
const API_SECTION: &str = "API overview";

/// (METHOD, path) of every operation of the document payorch serves at `/openapi.json`.
fn documented() -> BTreeSet<(String, String)> {
    let doc = openapi::document(ApiDoc::openapi());
    doc["paths"]
        .as_object()
        .expect("the document has paths")
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .into_iter()
                .flat_map(|methods| methods.keys())
                .filter(|m| ["get", "post", "put", "patch", "delete"].contains(&m.as_str()))
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect()
}

/// (METHOD, path) of the pages and the checkout demo, served beside the API but not in its
/// document: each `resource("path", "METHODS")` of src/http/mod.rs.
fn pages_served() -> BTreeSet<(String, String)> {
    let routes = page("src/http/mod.rs").text;
    let mut served = BTreeSet::new();
    for (_, rest) in routes
        .match_indices("resource(\"")
        .map(|(i, _)| routes.split_at(i + 10))
    {
        let Some((path, rest)) = rest.split_once('"') else {
            continue;
        };
        let Some(allow) = rest
            .strip_prefix(", \"")
            .and_then(|r| r.split_once('"'))
            .map(|(allow, _)| allow)
        else {
            continue;
        };
        for method in allow.split(',') {
            served.insert((method.trim().to_string(), path.to_string()));
        }
    }
    served
}

/// The routes a table row names: each code span of its first cell, `METHOD /path`, its
/// query (`?limit&starting_after`) left out.
fn routes_of(cell: &str) -> Result<Vec<(String, String)>, String> {
    code_spans(cell)
        .into_iter()
        .map(|span| {
            let (method, target) = span
                .split_once(' ')
                .ok_or_else(|| format!("`{span}`: write each route whole, `METHOD /path`"))?;
            let path = target.split('?').next().unwrap_or(target);
            if !path.starts_with('/') || method.chars().any(|c| !c.is_ascii_uppercase()) {
                return Err(format!("`{span}`: write each route whole, `METHOD /path`"));
            }
            Ok((method.to_string(), path.to_string()))
        })
        .collect()
}

#[test]
fn every_route_a_table_names_is_served() {
    let pages = pages();
    let served: BTreeSet<_> = documented().union(&pages_served()).cloned().collect();
    let mut problems = Vec::new();
    for (page, table) in tables_headed(&pages, &HEADER) {
        for row in &table.rows {
            match routes_of(&row.cells[0]) {
                Err(problem) => problems.push(format!("{}:{}: {problem}", page.path, row.line)),
                Ok(routes) => {
                    for (method, path) in routes {
                        if !served.contains(&(method.clone(), path.clone())) {
                            problems.push(format!(
                                "{}:{}: `{method} {path}` is not served (neither in \
                                 /openapi.json nor a page of src/http/mod.rs): remove or \
                                 correct it",
                                page.path, row.line
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_api_table_lists_every_documented_operation_once() {
    let pages = pages();
    let tables: Vec<_> = pages
        .iter()
        .filter_map(|page| Some((page, section(page, API_SECTION)?)))
        .flat_map(|(page, section)| {
            tables(section.text, section.first_line)
                .into_iter()
                .filter(|t| t.header.iter().map(String::as_str).eq(HEADER))
                .map(move |t| (page, t))
        })
        .collect();
    assert!(
        !tables.is_empty(),
        "no table headed `| method and path | who | what |` under a heading \"{API_SECTION}\" \
         in README.md or docs/: the API's routes are checked there"
    );
    let mut problems = Vec::new();
    for (page, table) in tables {
        let mut listed = BTreeSet::new();
        for row in &table.rows {
            for route in routes_of(&row.cells[0]).unwrap_or_default() {
                if !listed.insert(route.clone()) {
                    problems.push(format!(
                        "{}:{}: `{} {}` twice",
                        page.path, row.line, route.0, route.1
                    ));
                }
            }
        }
        for (method, path) in documented().difference(&listed) {
            problems.push(format!(
                "{}:{}: add a row `| `{method} {path}` | <who> | <what> |` (an operation of \
                 /openapi.json)",
                page.path, table.line
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

//! docs/operations/configuration.md is the configuration reference: below its hand-written
//! preamble, the text `payorch::config::reference::markdown(preamble)` writes from clap's
//! definitions (src/config.rs), so that a flag added, renamed, given another default or
//! another help fails here until the page is regenerated with it:
//! `PAYORCH_BLESS_DOCS=1 cargo test --test docs_truth configuration` rewrites the generated
//! part, to be read and committed with the change (off CI only: see `blessing`).

use std::fs;

use payorch::config::reference::{markdown, GENERATED_MARK};

use crate::markdown::repo;

const PAGE: &str = "docs/operations/configuration.md";
const BLESS: &str = "PAYORCH_BLESS_DOCS=1 cargo test --test docs_truth configuration";

#[test]
fn the_configuration_reference_is_the_clis_own() {
    let path = repo().join(PAGE);
    let committed = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let Some(at) = committed.find(GENERATED_MARK) else {
        panic!(
            "{PAGE} has no line starting {GENERATED_MARK:?}: its preamble is kept above that \
             line and the reference written below it; add the line after the preamble and run \
             `{BLESS}`"
        );
    };
    let (preamble, generated) = committed.split_at(at);
    let wanted = markdown(preamble);
    if blessing() {
        if generated != wanted {
            fs::write(&path, format!("{preamble}{wanted}")).expect("the page is writable");
        }
        return;
    }
    if generated == wanted {
        return;
    }
    let line = generated
        .lines()
        .zip(wanted.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| generated.lines().count().min(wanted.lines().count()));
    let first = preamble.lines().count() + line + 1;
    panic!(
        "{PAGE} is not what src/config.rs's flags say: it differs from line {first}\n  page: \
         {:?}\n  code: {:?}\nRun `{BLESS}` to rewrite it, then read and commit it",
        generated.lines().nth(line).unwrap_or("(end of page)"),
        wanted.lines().nth(line).unwrap_or("(end of text)")
    );
}

/// Whether this run rewrites the page: only when asked by `PAYORCH_BLESS_DOCS=1` exactly (an
/// inherited `0` or empty value compares, as if unset), and never under CI (`CI` set),
/// where a rewrite would make drift pass unseen: there the request stops the test.
fn blessing() -> bool {
    let asked = std::env::var_os("PAYORCH_BLESS_DOCS").is_some_and(|v| v == "1");
    if asked && std::env::var_os("CI").is_some() {
        panic!(
            "PAYORCH_BLESS_DOCS=1 with CI set: CI checks {PAGE}, it never rewrites it. Unset \
             PAYORCH_BLESS_DOCS, or run `{BLESS}` off CI and commit the page"
        );
    }
    asked
}

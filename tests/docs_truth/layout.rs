//! The "Layout" of docs/internals/layout.md names every folder of the repository's top, of
//! src/ and of crates/, and the README's short one every folder of the top; neither names
//! anything that is not there.

use std::fs;

use crate::markdown::{code_blocks, page, repo, section};

const LAYOUT: &str = "Layout";
/// The whole layout, folder by folder; the README keeps the top's.
const FULL: &str = "docs/internals/layout.md";
const SHORT: &str = "README.md";

/// The folders a newcomer looks for: the repository's own (not `target/`, not hidden), and
/// those of src/ and crates/, each as `name/` from the root.
fn folders() -> Vec<String> {
    let listed = |under: &str| -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(repo().join(under))
            .unwrap_or_else(|e| panic!("{under}: {e}"))
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('.') && name != "target")
            .map(|name| format!("{under}{name}/"))
            .collect();
        names.sort();
        names
    };
    let mut all = listed("");
    all.extend(listed("src/"));
    all.extend(listed("crates/"));
    all
}

/// The paths from the root the layout's text names: each word whose first part is a folder
/// of the repository's top (`src/db/`, `tests/chaos.rs`). Words like `keyed/`, under the
/// line above them, are not followed.
fn paths_named(layout: &str, top: &[String]) -> Vec<String> {
    layout
        .split(|c: char| c.is_whitespace() || "(),;`".contains(c))
        .map(|word| word.trim_end_matches([':', '.']))
        .filter(|word| top.iter().any(|folder| word.starts_with(folder.as_str())))
        .map(str::to_string)
        .collect()
}

/// What `path`'s "Layout" lacks of `folders`, and what it names that does not exist.
fn layout_problems(path: &str, folders: &[String], top: &[String]) -> Vec<String> {
    let doc = page(path);
    let layout = section(&doc, LAYOUT).unwrap_or_else(|| {
        panic!("{path} has no section \"{LAYOUT}\": the repository's layout is checked there")
    });
    let blocks = code_blocks(layout.text).join("\n");
    let named = paths_named(&blocks, top);
    let mut problems = Vec::new();
    for folder in folders {
        if !named.iter().any(|path| path.starts_with(folder.as_str())) {
            problems.push(format!(
                "{path}:{}: the layout names nothing of `{folder}`: add a line saying what it \
                 holds",
                layout.first_line
            ));
        }
    }
    for named in &named {
        if !repo().join(named).exists() {
            problems.push(format!(
                "{path}:{}: the layout names `{named}`, which does not exist: remove or \
                 correct it",
                layout.first_line
            ));
        }
    }
    problems
}

#[test]
fn the_layout_names_every_folder_and_only_what_exists() {
    let folders = folders();
    let top: Vec<String> = folders
        .iter()
        .filter(|f| f.matches('/').count() == 1)
        .cloned()
        .collect();
    let mut problems = layout_problems(FULL, &folders, &top);
    problems.extend(layout_problems(SHORT, &top, &top));
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

//! One way to write SQL (docs/DESIGN.md, "Writing SQL"), held by a test: diesel's
//! `sql_query` is re-planned on every run (diesel marks it unsafe to cache) and numbers its
//! `$n`s by hand, so the code outside tests calls it only for DDL, which takes no parameters
//! and runs once. Every other hand-written statement is a [`Statement`](super::statement)
//! with its snapshot in `tests/sql/`.
//!
//! The test reads the files under `src/` and names, file and line, every call outside
//! [`DDL`], a comment or a `#[cfg(test)]` module. An entry of [`DDL`] that no longer calls
//! it fails too, so the list stays the list of today's DDL.

use std::path::{Path, PathBuf};

/// The files allowed to call it, each with the DDL it runs.
const DDL: [(&str, &str); 2] = [
    ("src/db/mod.rs", "CREATE DATABASE"),
    (
        "src/events/endpoints/sealed.rs",
        "ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT",
    ),
];

/// What a call looks like, put together so that this file holds none.
fn call() -> String {
    ["sql", "_query("].concat()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a directory of src/") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The 1-based lines of `text` that call it, outside comments and `#[cfg(test)]` modules.
/// A test module is skipped from its `mod … {` to the brace that closes it (braces counted
/// naively: a string holding an unbalanced brace would end it early).
fn calls_in(text: &str) -> Vec<usize> {
    let call = call();
    let mut found = Vec::new();
    let mut test_attribute = false;
    let mut test_depth: Option<i64> = None;
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim();
        if let Some(depth) = test_depth.as_mut() {
            *depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            if *depth <= 0 {
                test_depth = None;
            }
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            test_attribute = true;
            continue;
        }
        if test_attribute && !trimmed.starts_with("#[") && !trimmed.is_empty() {
            test_attribute = false;
            let opens = code.matches('{').count() as i64 - code.matches('}').count() as i64;
            if (trimmed.starts_with("mod ") || trimmed.contains(" mod ")) && opens > 0 {
                test_depth = Some(opens);
                continue;
            }
        }
        if code.contains(&call) {
            found.push(i + 1);
        }
    }
    found
}

#[test]
fn sql_query_is_called_only_for_ddl() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    let mut allowed_and_used = Vec::new();
    for path in rust_files(&root.join("src")) {
        let name = path
            .strip_prefix(&root)
            .expect("under the crate")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).expect("read a file of src/");
        let lines = calls_in(&text);
        if lines.is_empty() {
            continue;
        }
        if DDL.iter().any(|(file, _)| *file == name) {
            allowed_and_used.push(name);
            continue;
        }
        offenders.extend(lines.into_iter().map(|line| format!("{name}:{line}")));
    }
    assert!(
        offenders.is_empty(),
        "{} outside DDL: write the statement with db::statement::Statement and snapshot it \
         (docs/DESIGN.md, \"Writing SQL\"), or, for DDL, add the file to db::one_way::DDL:\n{}",
        call(),
        offenders.join("\n")
    );
    let stale: Vec<_> = DDL
        .iter()
        .filter(|(file, _)| !allowed_and_used.iter().any(|used| used == file))
        .collect();
    assert!(
        stale.is_empty(),
        "db::one_way::DDL lists files that no longer call {}: {stale:?}",
        call()
    );
}

#[test]
fn calls_in_comments_and_test_modules_do_not_count() {
    let call = call();
    let text = format!(
        "fn a() {{ diesel::{call}\"x\"); }}\n\
         // diesel::{call}\"y\")\n\
         /// {call}\n\
         #[cfg(test)]\n\
         mod tests {{\n\
             fn b() {{ diesel::{call}\"z\"); }}\n\
         }}\n\
         fn c() {{ {call}\"w\"); }}\n"
    );
    assert_eq!(calls_in(&text), vec![1, 8]);
}

//! Snapshots of the keyed statements' full text, so that a change to the SQL shows in review
//! as a diff of SQL (`tests/sql/<name>.sql`). A statement whose text no longer matches its
//! snapshot fails its test; `PAYORCH_BLESS_SQL=1 cargo test --lib` writes the new text, to be
//! read and committed with the change.

use std::path::PathBuf;

use super::sql::Sql;

/// Compares `sql`'s text with the snapshot `name`, or writes it when blessing.
pub(crate) fn assert_sql_snapshot(name: &str, sql: &Sql<'_>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sql")
        .join(format!("{name}.sql"));
    let text = format!("{}\n", sql.text().trim());
    if std::env::var_os("PAYORCH_BLESS_SQL").is_some() {
        std::fs::create_dir_all(path.parent().expect("tests/sql")).expect("make tests/sql");
        std::fs::write(&path, &text).expect("write the snapshot");
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!("no snapshot tests/sql/{name}.sql: run PAYORCH_BLESS_SQL=1 cargo test --lib")
    });
    if kept != text {
        let first = kept
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(kept.lines().count().min(text.lines().count()));
        panic!(
            "statement {name} differs from tests/sql/{name}.sql from line {}:\n\
             kept: {:?}\n\
             now:  {:?}\n\
             If the change is meant, run PAYORCH_BLESS_SQL=1 cargo test --lib and commit the \
             snapshot with it.",
            first + 1,
            kept.lines().nth(first).unwrap_or(""),
            text.lines().nth(first).unwrap_or(""),
        );
    }
}

//! The Commands table names every command of `payorch` (clap's, src/config.rs), and no
//! command it does not have.

use std::collections::BTreeSet;

use clap::{Command, CommandFactory};
use payorch::config::Cli;

use crate::markdown::{code_spans, pages, tables_headed};

const HEADER: [&str; 2] = ["command", "what"];

/// Every command a user types, as the words after `payorch` (`keys rotate`): the leaves of
/// clap's tree, `help` left out.
fn commands() -> BTreeSet<String> {
    fn leaves(command: &Command, prefix: &str, found: &mut BTreeSet<String>) {
        let subcommands: Vec<&Command> = command
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .collect();
        if subcommands.is_empty() {
            found.insert(prefix.trim().to_string());
        }
        for sub in subcommands {
            leaves(sub, &format!("{prefix} {}", sub.get_name()), found);
        }
    }
    let mut found = BTreeSet::new();
    leaves(&Cli::command(), "", &mut found);
    found
}

/// The command a code span writes (`payorch keys revoke key_…` → `keys revoke`): the words
/// after `payorch` up to the first argument.
fn command_of(span: &str) -> Option<String> {
    let rest = span.strip_prefix("payorch ")?;
    let words: Vec<&str> = rest
        .split_whitespace()
        .take_while(|w| {
            !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        })
        .collect();
    Some(words.join(" "))
}

#[test]
fn the_command_table_lists_every_command_and_no_other() {
    let commands = commands();
    assert!(
        commands.contains("serve"),
        "payorch's commands: {commands:?}"
    );
    let pages = pages();
    let tables = tables_headed(&pages, &HEADER);
    assert!(
        !tables.is_empty(),
        "no table headed `| command | what |` in README.md or docs/: payorch's commands are \
         checked there"
    );
    let mut problems = Vec::new();
    for (page, table) in &tables {
        let mut listed = BTreeSet::new();
        for row in &table.rows {
            for command in code_spans(&row.cells[0]).into_iter().filter_map(command_of) {
                if !commands.contains(&command) {
                    problems.push(format!(
                        "{}:{}: `payorch {command}` is no command of payorch: remove or correct it",
                        page.path, row.line
                    ));
                }
                listed.insert(command);
            }
        }
        for missing in commands.difference(&listed) {
            problems.push(format!(
                "{}:{}: add a row `| `payorch {missing} …` | <what it does> |` (a command of \
                 payorch)",
                page.path, table.line
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn a_command_is_read_up_to_its_first_argument() {
    assert_eq!(
        command_of("payorch keys revoke key_…").unwrap(),
        "keys revoke"
    );
    assert_eq!(
        command_of("payorch sandbox --bind 127.0.0.1:PORT").unwrap(),
        "sandbox"
    );
    assert_eq!(
        command_of("payorch merchant create --name N [--json]").unwrap(),
        "merchant create"
    );
    assert_eq!(command_of("--support [--role read|operate]"), None);
}

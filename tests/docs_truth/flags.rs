//! The flags the docs name are payorch's. The reference of them all is
//! docs/operations/configuration.md, written from clap's definitions (src/config.rs) and held
//! to them by configuration.rs; here, a flag table elsewhere (`| flag | env | default | what |`,
//! a page's short list of the flags that matter to it) names only flags of `serve`, each with
//! its own environment variable and default, and any flag or `PAYORCH_…` variable written in
//! backticks anywhere in README.md or docs/ is one that exists.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use clap::{ArgAction, CommandFactory};
use payorch::config::Cli;

use crate::markdown::{code_spans, pages, repo, tables_headed};

const HEADER: [&str; 4] = ["flag", "env", "default", "what"];

/// A flag of `serve` as clap has it.
struct Flag {
    env: Option<String>,
    /// Its default as the table writes it: clap's values comma-joined, `off` for a switch.
    default: Option<String>,
}

/// `serve`'s flags by long name (without `--`), the global ones (`--log-json`) included;
/// hidden ones and `--help` left out.
fn serve_flags() -> BTreeMap<String, Flag> {
    let mut cli = Cli::command();
    cli.build();
    let serve = cli
        .find_subcommand("serve")
        .expect("payorch has a serve command");
    serve
        .get_arguments()
        .filter(|arg| !arg.is_hide_set() && arg.get_id() != "help")
        .filter_map(|arg| {
            let long = arg.get_long()?.to_string();
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = match arg.get_action() {
                ArgAction::SetTrue => Some("off".to_string()),
                _ if defaults.is_empty() => None,
                _ => Some(defaults.join(",")),
            };
            Some((long, Flag { env, default }))
        })
        .collect()
}

/// Whether the table's default cell says `default`: the whole cell, or its start followed
/// by words (`on with the in-process sandbox, else off`), never by more of a number.
fn says_default(cell: &str, default: &str) -> bool {
    let cell = cell.replace('`', "");
    let cell = cell.trim();
    cell == default
        || cell
            .strip_prefix(default)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|next| !next.is_ascii_alphanumeric() && next != '.')
}

/// Every `"NAME"` string literal under src/: where an environment variable read without a
/// flag (`PAYORCH_PG_BIN_DIR`) is named.
fn string_literals_of_src() -> String {
    fn walk(dir: &Path, all: &mut String) {
        for entry in fs::read_dir(dir).expect("src/ readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, all);
            } else if path.extension().is_some_and(|e| e == "rs") {
                all.push_str(&fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    let mut all = String::new();
    walk(&repo().join("src"), &mut all);
    all
}

/// A flag table need not list every flag (the reference does), but what it lists is so.
#[test]
fn a_flag_table_names_serves_flags_with_their_env_and_default() {
    let flags = serve_flags();
    assert!(flags.len() > 40, "serve's flags not found: {}", flags.len());
    let pages = pages();
    let tables = tables_headed(&pages, &HEADER);
    let src = string_literals_of_src();
    let mut problems = Vec::new();
    for (page, table) in &tables {
        let at = |line: usize| format!("{}:{line}", page.path);
        let mut listed = BTreeSet::new();
        for row in &table.rows {
            let [flag_cell, env_cell, default_cell, what] = &row.cells[..] else {
                problems.push(format!("{}: a row has four cells", at(row.line)));
                continue;
            };
            let named: Vec<&str> = code_spans(flag_cell);
            let envs: Vec<&str> = code_spans(env_cell);
            if what.is_empty() {
                problems.push(format!("{}: say what the flag does", at(row.line)));
            }
            if named.is_empty() {
                // A variable read without a flag: it must be read somewhere.
                for env in envs {
                    if !src.contains(&format!("\"{env}\"")) {
                        problems.push(format!(
                            "{}: `{env}` is read nowhere in src/: remove the row",
                            at(row.line)
                        ));
                    }
                }
                continue;
            }
            if named.len() > 1 {
                problems.push(format!(
                    "{}: one flag per row, so that its env and default are its own ({})",
                    at(row.line),
                    named.join(", ")
                ));
            }
            for name in named {
                let long = name.trim_start_matches("--");
                let Some(flag) = flags.get(long) else {
                    problems.push(format!(
                        "{}: `{name}` is no flag of `payorch serve`: remove the row or correct \
                         it",
                        at(row.line)
                    ));
                    continue;
                };
                if !listed.insert(long) {
                    problems.push(format!("{}: `{name}` twice", at(row.line)));
                }
                if let Some(env) = &flag.env {
                    if !envs.contains(&env.as_str()) {
                        problems.push(format!(
                            "{}: `{name}`'s variable is `{env}`: write it, in backticks, in \
                             the env cell",
                            at(row.line)
                        ));
                    }
                }
                if let Some(default) = &flag.default {
                    if !says_default(default_cell, default) {
                        problems.push(format!(
                            "{}: `{name}`'s default is `{default}`, the row says {default_cell:?}",
                            at(row.line)
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn a_default_is_read_whole() {
    assert!(says_default("10000", "10000"));
    assert!(says_default("`127.0.0.1:8080`", "127.0.0.1:8080"));
    assert!(says_default("off", "off"));
    assert!(says_default("20 (see below)", "20"));
    assert!(!says_default("10000", "1000"));
    assert!(!says_default("2.5", "2"));
    assert!(!says_default("on", "off"));
}

/// Every long flag, and every alias, of each command of `clap_command` and below.
fn flags_of(command: &clap::Command, found: &mut BTreeSet<String>) {
    for arg in command.get_arguments() {
        found.extend(arg.get_long().map(str::to_string));
        found.extend(
            arg.get_all_aliases()
                .into_iter()
                .flatten()
                .map(str::to_string),
        );
    }
    for sub in command.get_subcommands() {
        flags_of(sub, found);
    }
}

/// Whether the example receiver (examples/webhook_receiver.rs, its own clap command, which a
/// test cannot import) takes `--name`: a field of its arguments, or a `long = "name"`.
fn the_example_takes(name: &str, example: &str) -> bool {
    example.contains(&format!("long = \"{name}\""))
        || example.contains(&format!("    {}: ", name.replace('-', "_")))
}

/// A flag the docs write in backticks, bare (`--drain-secs`, `--allow-http-webhooks=false`) or
/// after `payorch` (`payorch keys rotate key_… [--overlap-secs N]`), is one that payorch, the
/// chaos driver or the example receiver takes. What `cargo` or a script is given is theirs.
#[test]
fn every_flag_the_docs_name_exists() {
    let mut known = BTreeSet::new();
    let mut payorch = Cli::command();
    payorch.build();
    flags_of(&payorch, &mut known);
    flags_of(&payorch_chaos::Args::command(), &mut known);
    let example = fs::read_to_string(repo().join("examples/webhook_receiver.rs")).unwrap();
    let mut problems = Vec::new();
    for page in pages() {
        for (i, line) in page.text.lines().enumerate() {
            for span in code_spans(line) {
                if !(span.starts_with("--") || span.starts_with("payorch ")) {
                    continue;
                }
                for word in span.split_whitespace() {
                    let Some(flag) = word
                        .trim_matches(|c| c == '[' || c == ']')
                        .strip_prefix("--")
                    else {
                        continue;
                    };
                    let name = flag.split('=').next().unwrap_or(flag);
                    let known = known.contains(name) || the_example_takes(name, &example);
                    // `--…-file`: a pattern of flags, not one.
                    if !name.is_empty() && !name.contains('…') && !known {
                        problems.push(format!(
                            "{}:{}: `--{name}` is a flag of no command (payorch's, the chaos \
                             driver's, the example receiver's): correct or remove it",
                            page.path,
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The text of every file under `folders`, joined: where payorch, its crates and its scripts
/// name the variables they read.
fn text_under(folders: &[&str]) -> String {
    fn walk(dir: &Path, all: &mut String) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                walk(&path, all);
            } else if let Ok(text) = fs::read_to_string(&path) {
                all.push_str(&text);
            }
        }
    }
    let mut all = String::new();
    for folder in folders {
        walk(&repo().join(folder), &mut all);
    }
    all
}

/// A `PAYORCH_…` variable the docs write in backticks is read by payorch, its crates or its
/// scripts (a flag's `env`, or a name in their code); `PAYORCH_PROVIDER_<NAME>_…` by its
/// written part.
#[test]
fn every_variable_the_docs_name_is_read() {
    let code = text_under(&["src", "crates", "scripts", "benches", ".ci"]);
    let mut problems = Vec::new();
    for page in pages() {
        for (i, line) in page.text.lines().enumerate() {
            for span in code_spans(line) {
                for (at, _) in span.match_indices("PAYORCH_") {
                    let name: String = span[at..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if !code.contains(&name) {
                        problems.push(format!(
                            "{}:{}: `{name}` is read by nothing of payorch's: correct or remove it",
                            page.path,
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

//! The configuration reference (docs/operations/configuration.md, below its preamble), written
//! from the clap definitions of this module so that it cannot drift from what payorch takes:
//! every command, in the CLI's order, with each argument's flag, environment variable,
//! default, value and help (its doc comment, which `--help` prints too), grouped under the
//! headings `--help` shows. A test holds the committed page to this text (tests/docs_truth,
//! configuration.rs).

use std::fmt::Write;

use clap::{Arg, ArgAction, Command, CommandFactory};

use super::Cli;

/// The first line of the generated part: what made it and how to make it again. The page's
/// hand-written preamble ends where this line starts.
pub const GENERATED_MARK: &str = "<!-- Generated from payorch's command-line definitions";

/// The reference as Markdown: the flags every command takes, then one section per command.
pub fn markdown() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = String::new();
    writeln!(
        out,
        "{GENERATED_MARK} (src/config.rs) by\n     payorch::config::reference::markdown(). Edit \
         the doc comments there, then\n     PAYORCH_BLESS_DOCS=1 cargo test --test docs_truth \
         configuration rewrites what follows. -->"
    )
    .unwrap();
    let globals: Vec<&Arg> = shown(&cli).filter(|arg| arg.is_global_set()).collect();
    if !globals.is_empty() {
        out.push_str("\n## Every command\n\nEvery command takes these too.\n");
        for arg in globals {
            write_arg(&mut out, arg);
        }
    }
    let mut written_groups = Vec::new();
    for command in leaves(&cli) {
        write_command(&mut out, &command, &mut written_groups);
    }
    out
}

/// The commands a user runs (`keys rotate`, not `keys`), in the CLI's order, `help` left out;
/// each with its full name as its bin name (`payorch keys rotate`).
fn leaves(cli: &Command) -> Vec<Command> {
    fn walk(command: &Command, found: &mut Vec<Command>) {
        let subcommands: Vec<&Command> = command
            .get_subcommands()
            .filter(|sub| sub.get_name() != "help" && !sub.is_hide_set())
            .collect();
        if subcommands.is_empty() {
            found.push(command.clone());
        }
        for sub in subcommands {
            walk(sub, found);
        }
    }
    let mut found = Vec::new();
    for sub in cli
        .get_subcommands()
        .filter(|sub| sub.get_name() != "help" && !sub.is_hide_set())
    {
        walk(sub, &mut found);
    }
    found
}

/// The arguments a reader may give: not hidden, and not `--help` or `--version`.
fn shown(command: &Command) -> impl Iterator<Item = &Arg> {
    command.get_arguments().filter(|arg| {
        !arg.is_hide_set() && !matches!(arg.get_action(), ArgAction::Help | ArgAction::Version)
    })
}

/// A group of a command's arguments under one `--help` heading: its own, or clap's
/// "Arguments" (positional) and "Options" for those without one.
struct Group<'a> {
    title: &'a str,
    /// Whether the definitions gave the heading (a group shared by several commands).
    named: bool,
    args: Vec<&'a Arg>,
}

/// A group as written: its title and arguments' ids, the command it was written under and
/// the anchor of its heading, for the commands that share it to point to.
struct Written {
    key: (String, Vec<String>),
    command: String,
    anchor: String,
}

impl Group<'_> {
    /// What makes two commands' groups the same: their title and their arguments' ids.
    fn key(&self) -> (String, Vec<String>) {
        (
            self.title.to_owned(),
            self.args.iter().map(|a| a.get_id().to_string()).collect(),
        )
    }
}

/// The command's arguments but the global ones (written once, under "Every command"),
/// grouped by heading in the order each heading first appears, as `--help` orders them.
fn groups(command: &Command) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = Vec::new();
    for arg in shown(command).filter(|arg| !arg.is_global_set()) {
        let (title, named) = match arg.get_help_heading() {
            Some(heading) => (heading, true),
            None if arg.is_positional() => ("Arguments", false),
            None => ("Options", false),
        };
        match groups.iter_mut().find(|g| g.title == title) {
            Some(group) => group.args.push(arg),
            None => groups.push(Group {
                title,
                named,
                args: vec![arg],
            }),
        }
    }
    // clap lists the positional arguments first.
    groups.sort_by_key(|group| group.title != "Arguments" || group.named);
    groups
}

/// A heading's anchor as mdBook makes it: lower case, spaces to `-`, other punctuation but
/// `-` and `_` dropped (the first heading of that title gets it bare).
fn anchor(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The anchor mdBook gives the next heading titled `title` on the page `out` begins: the
/// first of a title gets it bare, the next `-1`, then `-2`.
fn next_anchor(out: &str, title: &str) -> String {
    let bare = anchor(title);
    let before = out
        .lines()
        .filter_map(|line| {
            line.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| line.starts_with('#'))
        })
        .filter(|heading| anchor(heading) == bare)
        .count();
    match before {
        0 => bare,
        n => format!("{bare}-{n}"),
    }
}

fn write_command(out: &mut String, command: &Command, written: &mut Vec<Written>) {
    let name = command
        .get_bin_name()
        .unwrap_or_else(|| command.get_name())
        .to_owned();
    writeln!(out, "\n## `{name}`\n").unwrap();
    if let Some(about) = command.get_long_about().or(command.get_about()) {
        writeln!(out, "{}\n", prose(&about.to_string())).unwrap();
    }
    let usage = command.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    writeln!(out, "Usage: `{usage}`").unwrap();
    for group in groups(command) {
        let title = group.title;
        let here = next_anchor(out, title);
        writeln!(out, "\n### {title}").unwrap();
        // A group several commands share (the database's flags) is written in full once and
        // pointed to after, so the page lists each flag once where it can.
        let key = group.key();
        if let Some(first) = written.iter().find(|w| w.key == key) {
            if group.named && group.args.len() > 2 {
                let flags: Vec<String> = group.args.iter().map(|a| flag_name(a)).collect();
                writeln!(
                    out,
                    "\nAs for `{}` ([{title}](#{})): {}.",
                    first.command,
                    first.anchor,
                    flags.join(", ")
                )
                .unwrap();
                continue;
            }
        } else {
            written.push(Written {
                key,
                command: name.clone(),
                anchor: here,
            });
        }
        for arg in group.args {
            write_arg(out, arg);
        }
    }
}

/// `` `--bind` ``, or `` `<KEY_ID>` `` for a positional argument.
fn flag_name(arg: &Arg) -> String {
    match arg.get_long() {
        Some(long) => format!("`--{long}`"),
        None => format!("`<{}>`", value_name(arg)),
    }
}

fn value_name(arg: &Arg) -> String {
    arg.get_value_names()
        .and_then(|names| names.first())
        .map(|name| name.to_string())
        .unwrap_or_else(|| arg.get_id().to_string().to_uppercase())
}

fn takes_a_value(arg: &Arg) -> bool {
    !matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
    )
}

/// Whether the argument's values are `true` and `false` (and their synonyms, hidden).
fn is_boolean(arg: &Arg) -> bool {
    let shown: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    !shown.is_empty() && shown.iter().all(|v| v == "true" || v == "false")
}

fn write_arg(out: &mut String, arg: &Arg) {
    writeln!(out, "\n#### {}\n", flag_name(arg)).unwrap();
    let mut facts = Vec::new();
    let positional = arg.get_long().is_none() && arg.get_short().is_none();
    if positional {
        facts.push(if arg.is_required_set() {
            "Required".to_owned()
        } else {
            "Optional".to_owned()
        });
    } else if !takes_a_value(arg) {
        facts.push("A switch".to_owned());
    } else {
        let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
        let long = arg.get_long().unwrap_or_default();
        let value = value_name(arg);
        if optional && is_boolean(arg) {
            facts.push(format!("`--{long}` or `--{long}=false`"));
        } else if optional {
            facts.push(format!("`--{long}` or `--{long}=<{value}>`"));
        } else if value != arg.get_id().as_str().to_uppercase() {
            // A value name of its own says what to give (`<PATH>`); clap's, the field's name
            // in capitals, says nothing the heading does not.
            facts.push(format!("`--{long} <{value}>`"));
        }
    }
    if arg.is_required_set() && !positional {
        facts.push("required".to_owned());
    }
    let required = arg.is_required_set();
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    // A switch's possible values are clap's `true`/`false`: its being a switch says it.
    if !possible.is_empty() && takes_a_value(arg) && !is_boolean(arg) {
        facts.push(format!("one of {}", possible.join(", ")));
    }
    if matches!(arg.get_action(), ArgAction::Append) {
        facts.push(match arg.get_value_delimiter() {
            Some(delimiter) => format!("repeated or `{delimiter}`-separated"),
            None => "repeated".to_owned(),
        });
    }
    if let Some(env) = arg.get_env() {
        facts.push(format!("variable `{}`", env.to_string_lossy()));
    }
    if !(required && arg.get_default_values().is_empty()) {
        facts.push(default_of(arg));
    }
    let aliases: Vec<String> = arg
        .get_visible_aliases()
        .into_iter()
        .flatten()
        .map(|alias| format!("`--{alias}`"))
        .collect();
    if !aliases.is_empty() {
        facts.push(format!("also {}", aliases.join(", ")));
    }
    let facts = facts.join(" · ");
    let mut first = facts.chars();
    let facts: String = first
        .next()
        .map(|c| c.to_uppercase().chain(first).collect())
        .unwrap_or_default();
    writeln!(out, "{facts}\n").unwrap();
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|help| help.to_string())
        .unwrap_or_default();
    if help.trim().is_empty() {
        out.push_str("(No description.)\n");
    } else {
        writeln!(out, "{}", prose(&help)).unwrap();
    }
}

/// The default as a reader takes it: a switch's `false` is "off", values are comma-joined.
fn default_of(arg: &Arg) -> String {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    match arg.get_action() {
        ArgAction::SetTrue => "default off".to_owned(),
        ArgAction::SetFalse => "default on".to_owned(),
        // What unset means, where it means something, the help says ("one per core").
        _ if defaults.is_empty() => "unset".to_owned(),
        _ => format!("default `{}`", defaults.join(",")),
    }
}

/// A help text as Markdown prose: its paragraphs kept, and outside code spans a `<` (which
/// would open HTML) and a `*` (emphasis) escaped, so what `--help`
/// says is what the page shows.
fn prose(text: &str) -> String {
    let text = text.trim();
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
            continue;
        }
        for c in part.chars() {
            match c {
                '<' => out.push_str("&lt;"),
                '*' => out.push_str("\\*"),
                c => out.push(c),
            }
        }
    }
    // clap drops a one-paragraph help's final full stop (`--help` lists it as a phrase); the
    // page reads it as a sentence.
    if !out.ends_with(['.', '?', '!', ':']) {
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_of_every_command_is_written_once_or_pointed_to() {
        let text = markdown();
        let mut cli = Cli::command();
        cli.build();
        for command in leaves(&cli) {
            let name = command.get_bin_name().unwrap().to_owned();
            let at = text
                .find(&format!("## `{name}`\n"))
                .unwrap_or_else(|| panic!("{name} has no section"));
            let section = &text[at..];
            let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
            let section = &section[..end];
            for arg in shown(&command).filter(|a| !a.is_global_set()) {
                assert!(
                    section.contains(&flag_name(arg)),
                    "{name}: {} missing",
                    flag_name(arg)
                );
            }
        }
        assert!(text.contains("#### `--log-json`"), "the global flags");
        assert!(text.contains("\nVariable `PAYORCH_DRAIN_SECS` · default `20`\n"));
        assert!(
            !text.contains("`--help`"),
            "--help is clap's, not a setting"
        );
    }

    #[test]
    fn prose_escapes_html_and_emphasis_outside_code() {
        assert_eq!(prose("a <b> `<c>` *d*"), "a &lt;b> `<c>` \\*d\\*.");
    }

    #[test]
    fn anchors_are_mdbooks() {
        assert_eq!(anchor("`payorch serve`"), "payorch-serve");
        assert_eq!(anchor("`--drain-secs`"), "--drain-secs");
        assert_eq!(
            anchor("Events to merchants' endpoints"),
            "events-to-merchants-endpoints"
        );
        let page = "# Top\n\n### Database\n\ntext\n\n## Database\n";
        assert_eq!(next_anchor(page, "Database"), "database-2");
        assert_eq!(next_anchor(page, "Options"), "options");
    }
}

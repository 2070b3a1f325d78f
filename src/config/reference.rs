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

/// The reference as Markdown: the flags every command takes, then one section per command,
/// to follow `preamble` (the page's hand-written part, whose headings take their anchors
/// first, so that a link to a generated heading named like one of them still finds it).
pub fn markdown(preamble: &str) -> String {
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
        write_command(&mut out, preamble, &command, &mut written_groups);
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

/// A group as written: its title and text, the command it was written under and the anchor
/// of its heading, for the commands that share it to point to.
struct Written {
    key: (String, String),
    command: String,
    anchor: String,
}

impl Group<'_> {
    /// What makes two commands' groups the same: their title and every word written of their
    /// arguments, so that a flag of the same name with another default, variable or help is
    /// written out, never hidden behind "As for".
    fn key(&self) -> (String, String) {
        let mut text = String::new();
        for arg in &self.args {
            write_arg(&mut text, arg);
        }
        (self.title.to_owned(), text)
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

/// The titles of the page's `#` headings, those in fenced code blocks (a shell comment) left
/// out.
fn headings(page: &str) -> impl Iterator<Item = &str> {
    let mut fence: Option<&str> = None;
    page.lines().filter_map(move |line| {
        let trimmed = line.trim_start();
        for marker in ["```", "~~~"] {
            if trimmed.starts_with(marker) {
                match fence {
                    None => fence = Some(marker),
                    Some(open) if open == marker => fence = None,
                    Some(_) => {}
                }
                return None;
            }
        }
        if fence.is_some() || !line.starts_with('#') {
            return None;
        }
        line.trim_start_matches('#').strip_prefix(' ')
    })
}

/// The anchor mdBook gives the next heading titled `title` on the page `page` begins: the
/// first of a title gets it bare, the next `-1`, then `-2`.
fn next_anchor(page: &str, title: &str) -> String {
    let bare = anchor(title);
    let before = headings(page)
        .filter(|heading| anchor(heading) == bare)
        .count();
    match before {
        0 => bare,
        n => format!("{bare}-{n}"),
    }
}

fn write_command(out: &mut String, preamble: &str, command: &Command, written: &mut Vec<Written>) {
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
    writeln!(out, "Usage: {}", code(usage)).unwrap();
    for group in groups(command) {
        let title = group.title;
        let here = next_anchor(&format!("{preamble}{out}"), title);
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
        .map(|v| code(v.get_name()))
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
        facts.push(format!("variable {}", code(&env.to_string_lossy())));
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
        _ => match defaults.join(",") {
            joined if joined.is_empty() => "default empty".to_owned(),
            joined => format!("default {}", code(&joined)),
        },
    }
}

/// `text` as a code span: between backticks, or, when it holds some, between more of them
/// than it has in a row, with a space either side (CommonMark's rule).
fn code(text: &str) -> String {
    let longest = text
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    if longest == 0 {
        return format!("`{text}`");
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {text} {fence}")
}

/// A help text as Markdown prose, so that what `--help` says is what the page shows: its
/// paragraphs and its code spans kept, and everything else Markdown would read as markup
/// escaped (see [`escape_paragraph`]).
fn prose(text: &str) -> String {
    let paragraphs: Vec<String> = text
        .trim()
        .split("\n\n")
        .map(|p| p.trim_matches('\n'))
        .filter(|p| !p.trim().is_empty())
        .map(escape_paragraph)
        .collect();
    let mut out = paragraphs.join("\n\n");
    // clap drops a one-paragraph help's final full stop (`--help` lists it as a phrase); the
    // page reads it as a sentence.
    if !out.ends_with(['.', '?', '!', ':']) {
        out.push('.');
    }
    out
}

/// One paragraph of help as Markdown. Inside a code span (a pair of backticks) nothing is
/// touched; a backtick without a partner is escaped, lest it open a span that swallows the
/// rest. Outside: `\\`, `*`, `[` and `~` escaped (emphasis, links, strikethrough), `_`
/// where it could open or close emphasis (not inside a word: `PAYORCH_DRAIN_SECS`), `<` as
/// `&lt;` and an `&` that would start an entity as `&amp;`; each line's indent and trailing
/// spaces dropped (a code block, a hard break), and a line starting as a heading, a quote,
/// a list item or a heading's underline (`#`, `>`, `-`, `+`, `=`, `1.`, `1)`) escaped.
fn escape_paragraph(paragraph: &str) -> String {
    let lines: Vec<&str> = paragraph.lines().map(str::trim).collect();
    let ticks: usize = lines.iter().map(|line| line.matches('`').count()).sum();
    let mut ticks_left = ticks;
    let mut in_code = false;
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        if !in_code {
            if matches!(chars.first(), Some('#' | '>' | '-' | '+' | '=')) {
                out.push('\\');
            } else {
                let digits = chars.iter().take_while(|c| c.is_ascii_digit()).count();
                let after = chars.get(digits + 1);
                if (1..=9).contains(&digits)
                    && matches!(chars.get(digits), Some('.' | ')'))
                    && after.is_none_or(|c| c.is_whitespace())
                {
                    out.extend(&chars[..digits]);
                    out.push('\\');
                    i = digits;
                }
            }
        }
        while i < chars.len() {
            let c = chars[i];
            if c == '`' {
                ticks_left -= 1;
                // The last backtick of an odd count has no partner.
                if !in_code && ticks % 2 == 1 && ticks_left == 0 {
                    out.push_str("\\`");
                } else {
                    in_code = !in_code;
                    out.push('`');
                }
            } else if in_code {
                out.push(c);
            } else {
                let word = |at: Option<&char>| at.is_some_and(|c| c.is_alphanumeric());
                match c {
                    '\\' | '*' | '[' | '~' => {
                        out.push('\\');
                        out.push(c);
                    }
                    '_' if !(word(i.checked_sub(1).and_then(|p| chars.get(p)))
                        && word(chars.get(i + 1))) =>
                    {
                        out.push_str("\\_");
                    }
                    '<' => out.push_str("&lt;"),
                    '&' if starts_an_entity(&chars[i + 1..]) => out.push_str("&amp;"),
                    c => out.push(c),
                }
            }
            i += 1;
        }
    }
    out
}

/// Whether what follows an `&` would make it an entity (`&lt;`, `&#60;`, `&#x3C;`).
fn starts_an_entity(rest: &[char]) -> bool {
    let name = rest
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '#')
        .count();
    name > 0 && rest.get(name) == Some(&';')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_of_every_command_is_written_once_or_pointed_to() {
        let text = markdown("");
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
        assert_eq!(prose("_x_ and __y__"), "\\_x\\_ and \\_\\_y\\_\\_.");
        assert_eq!(
            prose("PAYORCH_DRAIN_SECS, `_x_`"),
            "PAYORCH_DRAIN_SECS, `_x_`.",
            "inside a word or code, `_` is no emphasis"
        );
        assert_eq!(prose("see [a](b) or ![i](j)"), "see \\[a](b) or !\\[i](j).");
        assert_eq!(prose("&lt; &#60; R&D &"), "&amp;lt; &amp;#60; R&D &.");
        assert_eq!(prose("a\\b ~c~"), "a\\\\b \\~c\\~.");
        assert_eq!(prose("`a` and `<b>` `c"), "`a` and `<b>` \\`c.");
        assert_eq!(prose("`*a*` `"), "`*a*` \\`.", "the last of an odd count");
    }

    #[test]
    fn prose_keeps_a_line_from_starting_a_block() {
        for (help, page) in [
            ("a\n\n# b", "a\n\n\\# b."),
            ("a\n\n- b", "a\n\n\\- b."),
            ("a\n\n+ b", "a\n\n\\+ b."),
            ("a\n\n> b", "a\n\n\\> b."),
            ("a\n\n1. b", "a\n\n1\\. b."),
            ("a\n\n12) b", "a\n\n12\\) b."),
            ("a\n===", "a\n\\===."),
            ("a\n---", "a\n\\---."),
            ("a\n\n    code", "a\n\ncode."),
            ("a  \nb", "a\nb."),
        ] {
            assert_eq!(prose(help), page, "{help:?}");
        }
        assert_eq!(prose("1.5 s"), "1.5 s.", "a number is no list item");
        assert_eq!(prose("`a\n- b`"), "`a\n- b`.", "nor is a code span's line");
    }

    #[test]
    fn code_spans_hold_what_they_are_given() {
        assert_eq!(code("127.0.0.1:8080"), "`127.0.0.1:8080`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("a``b"), "``` a``b ```");
    }

    #[test]
    fn an_empty_default_is_said_in_words() {
        let arg = Arg::new("x").long("x").default_value("");
        assert_eq!(default_of(&arg), "default empty");
        let arg = Arg::new("x").long("x").default_value("20");
        assert_eq!(default_of(&arg), "default `20`");
    }

    #[test]
    fn a_flag_shared_by_name_but_not_in_full_is_written_out() {
        let db = |default: &'static str| {
            Command::new("c").args(["a", "b", "c"].map(|id| {
                Arg::new(id)
                    .long(id)
                    .help_heading("Database")
                    .default_value(default)
            }))
        };
        let (same, other) = (db("1"), db("2"));
        let key = |c: &Command| groups(c).remove(0).key();
        assert_eq!(key(&same), key(&db("1")));
        assert_ne!(key(&same), key(&other), "another default is another group");
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
        let fenced = "## Database\n\n```sh\n# Database\n```\n";
        assert_eq!(
            next_anchor(fenced, "Database"),
            "database-1",
            "a shell comment is none"
        );
    }

    #[test]
    fn the_preamble_s_headings_come_first() {
        let preamble = "# Configuration reference\n\n## Database\n\nWhere it is.\n\n";
        let text = markdown(preamble);
        assert!(
            text.contains("As for `payorch serve` ([Database](#database-1))"),
            "the generated Database is the page's second"
        );
        assert!(markdown("").contains("([Database](#database))"));
    }
}

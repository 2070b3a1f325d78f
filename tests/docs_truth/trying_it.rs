//! The Quickstart's "Trying it" runs only what a fresh machine has or the page says to install.

use crate::markdown::{code_blocks, code_spans, page, section};

/// A newcomer's first page, whose "Trying it" they paste from.
const PAGE: &str = "docs/quickstart.md";
const TRYING_IT: &str = "Trying it";
/// What every shell has: no install asked.
const EVERYWHERE: [&str; 4] = ["cat", "echo", "export", "cd"];

/// The programs a block of shell runs: each line's first word, and the first word after
/// `$(`, `|`, `;` and `&&` (a variable's assignment, `KEY=…`, is not a program; a line
/// ending in `\` goes on in the next).
fn programs(block: &str) -> Vec<String> {
    let mut found = Vec::new();
    // A line ending in `\` goes on in the next: one command.
    let joined = block.replace("\\\n", " ");
    for line in joined.lines() {
        let line = line.split(" #").next().unwrap_or(line).trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let mut command_starts = vec![line];
        for separator in ["$(", "|", ";", "&&"] {
            command_starts.extend(
                line.match_indices(separator)
                    .map(|(i, s)| &line[i + s.len()..]),
            );
        }
        for start in command_starts {
            let mut words = start.split_whitespace().peekable();
            // `KEY=value cmd` runs `cmd`; `KEY=$(cmd …)` is read from its `$(`.
            while words
                .next_if(|w| w.contains('=') && !w.contains("$("))
                .is_some()
            {}
            let Some(word) = words.next() else {
                continue;
            };
            let is_name = word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if is_name && !word.starts_with('-') && !word.contains('=') {
                found.push(word.to_string());
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn trying_it_names_every_program_it_runs() {
    let quickstart = page(PAGE);
    let trying = section(&quickstart, TRYING_IT)
        .unwrap_or_else(|| panic!("{PAGE} has no section \"{TRYING_IT}\""));
    let prose: String = trying
        .text
        .lines()
        .filter(|l| !l.starts_with("    "))
        .collect::<Vec<_>>()
        .join("\n");
    let named = code_spans(&prose);
    let mut problems = Vec::new();
    for block in code_blocks(trying.text) {
        for program in programs(&block) {
            let said = named
                .iter()
                .any(|span| span.split_whitespace().any(|w| w == program));
            if !EVERYWHERE.contains(&program.as_str()) && !said {
                problems.push(format!(
                    "{PAGE}:{}: \"{TRYING_IT}\" runs `{program}`: say that it needs it, and \
                     how to install it (`apt-get install {program}`)",
                    trying.first_line
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_programs_of_a_line_are_its_commands() {
    let block = "KEY=$(jq -r .api_key x.json); MER=$(jq -r .m x.json)\n\
                 curl -H \"A: $KEY\" \\\n  -d '{}' http://x | python3 -m json.tool   # a comment\n\
                 # wget in a comment\n\
                 A=1 make\n";
    assert_eq!(programs(block), ["curl", "jq", "make", "python3"]);
}

//! The flags and variables the docs name are payorch's. The reference of every flag and its
//! variable is docs/operations/configuration.md, written from clap's definitions
//! (src/config.rs) and held to them by configuration.rs; here, the variables its hand-written
//! preamble names without a flag (`PAYORCH_MASTER_KEY`, a named provider's
//! `PAYORCH_PROVIDER_<NAME>_…`, `RUST_LOG`, …) are each one payorch reads, and any flag or
//! `PAYORCH_…` variable written in backticks anywhere in README.md or docs/ is one that exists.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clap::CommandFactory;
use payorch::config::reference::GENERATED_MARK;
use payorch::config::Cli;
use payorch::provider_specs::{providers_from_specs, CallTimeouts, ProviderSpec};

use crate::markdown::{code_spans, pages, repo};

const PAGE: &str = "docs/operations/configuration.md";

/// How the page writes a named provider's variables: `PAYORCH_PROVIDER_<NAME>_SECRET`, and
/// after it `…_SECRET` for short.
const PROVIDER: &str = "PAYORCH_PROVIDER_<NAME>_";

/// Every variable of every flag, of every command.
fn variables_of(command: &clap::Command, found: &mut BTreeSet<String>) {
    for arg in command.get_arguments() {
        found.extend(arg.get_env().map(|env| env.to_string_lossy().into_owned()));
    }
    for sub in command.get_subcommands() {
        variables_of(sub, found);
    }
}

/// The variables a named provider of each protocol is read from, as the code asks for them:
/// one provider of each built from an environment that records every name asked and answers
/// each with a value any of them takes (hex, for Adyen's HMAC keys; a URL for a `…_URL`);
/// `NAME` as `<NAME>`.
fn provider_variables() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    let timeouts = CallTimeouts {
        connect: Duration::from_secs(2),
        whole: Duration::from_secs(10),
        webhook_tolerance: Duration::from_secs(300),
    };
    // One at a time, both named `name`.
    for spec in [
        "name=stripe:https://stripe.test",
        "name=adyen:https://adyen.test",
    ] {
        let spec: ProviderSpec = spec.parse().expect("a provider spec");
        let built = providers_from_specs(&[spec], timeouts, |variable| {
            asked.borrow_mut().insert(variable.to_owned());
            // An address where one is asked (Adyen's Disputes API host), hex elsewhere.
            if variable.ends_with("_URL") {
                return Ok(Some("https://ca-test.adyen.test".to_owned()));
            }
            Ok(Some(
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff".to_owned(),
            ))
        });
        if let Err(err) = built {
            panic!("a provider was not built from the recorded environment: {err}");
        }
    }
    let asked = asked.into_inner();
    assert!(
        asked.len() >= 4,
        "a provider's variables not found: {asked:?}"
    );
    asked
        .into_iter()
        .map(|variable| {
            let rest = variable
                .strip_prefix("PAYORCH_PROVIDER_NAME_")
                .unwrap_or_else(|| panic!("{variable}: not a named provider's"));
            format!("{PROVIDER}{rest}")
        })
        .collect()
}

/// Whether a provider's variable `NAME` is also read from the file `NAME_FILE` names, as
/// `payorch serve` reads them (src/commands.rs gives providers_from_specs env_or_file): a
/// variable of this test's own asked through it.
fn provider_files_are_read() -> bool {
    // A name and a folder of each call's own: the tests asking run at once.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("payorch-docs-truth-{}-{call}", std::process::id()));
    fs::create_dir_all(&dir).expect("a temporary folder");
    let file = dir.join("secret");
    fs::write(&file, "from the file\n").expect("a temporary file");
    let name = format!("PAYORCH_DOCS_TRUTH_PROBE_{call}");
    let name = name.as_str();
    std::env::remove_var(name);
    std::env::set_var(format!("{name}_FILE"), &file);
    let read = payorch::secret_files::env_or_file(name);
    std::env::remove_var(format!("{name}_FILE"));
    let _ = fs::remove_dir_all(&dir);
    read == Ok(Some("from the file".to_owned()))
}

/// Every `"NAME"` given by name to `std::env::var` or `var_os` in payorch's code and its
/// crates' (`NO_COLOR`, `PATH`).
fn variables_read_by_name() -> BTreeSet<String> {
    fn walk(dir: &Path, found: &mut BTreeSet<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).unwrap_or_default();
                for call in ["var(\"", "var_os(\""] {
                    for (at, _) in text.match_indices(call) {
                        let rest = &text[at + call.len()..];
                        if let Some(end) = rest.find('"') {
                            found.insert(rest[..end].to_owned());
                        }
                    }
                }
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(&repo().join("src"), &mut found);
    walk(&repo().join("crates"), &mut found);
    found
}

/// The variables payorch reads: its flags', a named provider's (and their `_FILE` twins),
/// those named by a constant (the master keys, the cluster's binaries, the log filter, read
/// by tracing's `EnvFilter::try_from_default_env`) and those read by name.
fn variables_read() -> BTreeSet<String> {
    let mut read = BTreeSet::new();
    let mut payorch = Cli::command();
    payorch.build();
    variables_of(&payorch, &mut read);
    let providers = provider_variables();
    if provider_files_are_read() {
        read.extend(providers.iter().map(|v| format!("{v}_FILE")));
    }
    read.extend(providers);
    read.extend([
        payorch::sealing::sources::MASTER_KEY_VARIABLE.to_owned(),
        payorch::db::cluster::BIN_DIR_ENV.to_owned(),
        tracing_subscriber::EnvFilter::DEFAULT_ENV.to_owned(),
    ]);
    read.extend(variables_read_by_name());
    read
}

/// The variables a code span of the preamble names: a whole span in capitals
/// (`PAYORCH_MASTER_KEY`, `RUST_LOG`), a named provider's prefix (`PAYORCH_PROVIDER_<NAME>_…`)
/// or one of its variables for short (`…_HMAC_KEY`, as `PAYORCH_PROVIDER_<NAME>_HMAC_KEY`).
/// `…_FILE` is the twin of each provider variable.
fn named_in(span: &str) -> Option<String> {
    let capitals = |s: &str| {
        s.len() >= 3
            && s.starts_with(|c: char| c.is_ascii_uppercase())
            && s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    if let Some(rest) = span.strip_prefix("…_") {
        return capitals(rest).then(|| format!("{PROVIDER}{rest}"));
    }
    if span == format!("{PROVIDER}…") || capitals(span) {
        return Some(span.to_owned());
    }
    None
}

/// Each variable the configuration page's preamble names is one payorch reads: named there
/// (not in a flag's entry below), it has no other check.
#[test]
fn every_variable_the_configuration_preamble_names_is_read() {
    let text = fs::read_to_string(repo().join(PAGE)).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let preamble = &text[..text
        .find(GENERATED_MARK)
        .expect("the page's generated part")];
    let read = variables_read();
    let mut named = 0;
    let mut problems = Vec::new();
    for (i, line) in preamble.lines().enumerate() {
        for variable in code_spans(line).into_iter().filter_map(named_in) {
            named += 1;
            let is_read = if variable == format!("{PROVIDER}…") {
                read.iter().any(|v| v.starts_with(PROVIDER))
            } else if variable == format!("{PROVIDER}FILE") {
                let twins: Vec<&String> = read
                    .iter()
                    .filter(|v| v.starts_with(PROVIDER) && !v.ends_with("_FILE"))
                    .collect();
                !twins.is_empty() && twins.iter().all(|v| read.contains(&format!("{v}_FILE")))
            } else {
                read.contains(&variable)
            };
            if !is_read {
                problems.push(format!(
                    "{PAGE}:{}: `{variable}` is read by nothing of payorch's: correct or remove it",
                    i + 1
                ));
            }
        }
    }
    assert!(
        named >= 10,
        "{PAGE}'s preamble names {named} variables: are they read?"
    );
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn a_span_names_a_variable_in_capitals_or_a_providers_for_short() {
    assert_eq!(named_in("RUST_LOG").as_deref(), Some("RUST_LOG"));
    assert_eq!(
        named_in("…_HMAC_KEY").as_deref(),
        Some("PAYORCH_PROVIDER_<NAME>_HMAC_KEY")
    );
    assert_eq!(
        named_in("PAYORCH_PROVIDER_<NAME>_…").as_deref(),
        Some("PAYORCH_PROVIDER_<NAME>_…")
    );
    for not in ["--drain-secs", "NAME=value", "1", "--…-file", "initdb"] {
        assert_eq!(named_in(not), None, "{not}");
    }
    let read = variables_read();
    for variable in [
        "PAYORCH_PROVIDER_<NAME>_HMAC_KEY",
        "PAYORCH_PROVIDER_<NAME>_MERCHANT_ACCOUNT_FILE",
        "RUST_LOG",
        "NO_COLOR",
        "DATABASE_URL_FILE",
    ] {
        assert!(read.contains(variable), "{variable} in {read:?}");
    }
    assert!(!read.contains("PAYORCH_PROVIDER_<NAME>_PASSWORD"));
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

/// Whether `code` holds `name` as a whole name, not the start or end of a longer one
/// (`PAYORCH_PROVIDER_` is no variable for being the start of `PAYORCH_PROVIDER_SECRET`).
fn names_whole(code: &str, name: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name)
        .any(|(at, _)| !code[..at].ends_with(part) && !code[at + name.len()..].starts_with(part))
}

/// A `PAYORCH_…` variable the docs write in backticks is read by payorch, its crates or its
/// scripts: one of [`variables_read`], or named whole in their code (a script's
/// `os.environ`); `PAYORCH_PROVIDER_<NAME>_…` as a named provider's.
#[test]
fn every_variable_the_docs_name_is_read() {
    let code = text_under(&["src", "crates", "scripts", "benches", ".ci"]);
    let read = variables_read();
    let mut problems = Vec::new();
    for page in pages() {
        for (i, line) in page.text.lines().enumerate() {
            for span in code_spans(line) {
                for (at, _) in span.match_indices("PAYORCH_") {
                    let name: String = span[at..]
                        .chars()
                        .take_while(|c| {
                            c.is_ascii_uppercase() || c.is_ascii_digit() || "_<>…".contains(*c)
                        })
                        .collect();
                    // `PAYORCH_…`: the variables' common prefix, not one.
                    if name == "PAYORCH_…" {
                        continue;
                    }
                    let name = name.trim_end_matches(['_', '…']);
                    let stem = PROVIDER.trim_end_matches('_');
                    let known = if let Some(rest) = name.strip_prefix(stem) {
                        // What is written before a placeholder (`_<WHAT>_FILE`) starts a
                        // named provider's variable.
                        let rest = rest.split('<').next().unwrap_or_default();
                        read.iter()
                            .any(|v| v.strip_prefix(stem).is_some_and(|v| v.starts_with(rest)))
                    } else {
                        read.contains(name) || names_whole(&code, name)
                    };
                    if !known {
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

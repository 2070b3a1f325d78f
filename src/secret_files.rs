//! Secrets given as files, and a warning for those given on the command line, where every user
//! of the machine reads them in `ps` and they land in shell histories (docs/PRODUCTION.md,
//! "Secrets: where they come from and how they are kept"). Each secret flag has an environment
//! variable and a `--…-file` twin (`…_FILE`), the form container and systemd secrets take.

use std::path::Path;

use clap::parser::ValueSource;
use clap::ArgMatches;

/// The flags whose values are secrets: ids of the arguments (as clap names them) and the
/// environment variable or file flag to use instead.
const SECRET_FLAGS: &[(&str, &str, &str)] = &[
    (
        "database_url",
        "--database-url",
        "DATABASE_URL or --database-url-file",
    ),
    (
        "migration_database_url",
        "--migration-database-url",
        "PAYORCH_MIGRATION_DATABASE_URL or --migration-database-url-file",
    ),
    (
        "provider_secret",
        "--provider-secret",
        "PAYORCH_PROVIDER_SECRET or --provider-secret-file",
    ),
    (
        "metrics_token",
        "--metrics-token",
        "PAYORCH_METRICS_TOKEN or --metrics-token-file",
    ),
    (
        "webhook_secrets",
        "--webhook-secret",
        "PAYORCH_WEBHOOK_SECRET or --webhook-secret-file",
    ),
];

/// One warning per secret flag given on the command line of the command `matches` holds
/// (its subcommands included).
pub fn secrets_on_command_line(matches: &ArgMatches) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut level = Some(matches);
    while let Some(matches) = level {
        for (id, flag, instead) in SECRET_FLAGS {
            let present = matches.ids().any(|present| present.as_str() == *id);
            if present && matches.value_source(id) == Some(ValueSource::CommandLine) {
                warnings.push(format!(
                    "{flag} was given on the command line, where `ps` shows it to every user \
                     of this machine and shell histories keep it: use {instead}"
                ));
            }
        }
        level = matches.subcommand().map(|(_, sub)| sub);
    }
    warnings
}

/// The secret a file holds: its text without the trailing newline an editor or `echo` adds.
pub fn read_secret_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("secret file {}: {err}", path.display()))?;
    let secret = text.trim_end_matches(['\n', '\r']).to_owned();
    if secret.trim().is_empty() {
        return Err(format!("secret file {} is empty", path.display()));
    }
    Ok(secret)
}

/// The value of environment variable `name`, else the contents of the file named by
/// `name_FILE`: how a named provider's secrets are given (docs/guides/routing.md, "Routing and failover").
pub fn env_or_file(name: &str) -> Result<Option<String>, String> {
    if let Some(value) = std::env::var(name).ok().filter(|v| !v.trim().is_empty()) {
        return Ok(Some(value));
    }
    match std::env::var(format!("{name}_FILE")) {
        Ok(path) if !path.trim().is_empty() => read_secret_file(Path::new(path.trim())).map(Some),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::config::Cli;

    #[test]
    fn secrets_on_the_command_line_are_named_and_those_from_the_environment_are_not() {
        let matches = Cli::command()
            .try_get_matches_from([
                "payorch",
                "serve",
                "--provider-url",
                "https://api.stripe.com",
                "--provider-secret",
                "sk_live_visible_in_ps",
                "--webhook-secret",
                "whsec_a,whsec_b",
            ])
            .expect("the flags parse");
        let warnings = secrets_on_command_line(&matches);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("--provider-secret"), "{warnings:?}");
        assert!(warnings[1].contains("--webhook-secret"), "{warnings:?}");
        assert!(
            !warnings.concat().contains("sk_live_visible_in_ps"),
            "a warning never repeats the secret"
        );

        let matches = Cli::command()
            .try_get_matches_from(["payorch", "merchant", "create", "--name", "Shop"])
            .expect("the flags parse");
        assert!(secrets_on_command_line(&matches).is_empty());
        let matches = Cli::command()
            .try_get_matches_from([
                "payorch",
                "migrate",
                "--database-url",
                "postgres://app:pw@db/payorch",
            ])
            .expect("the flags parse");
        assert_eq!(secrets_on_command_line(&matches).len(), 1);
    }

    #[test]
    fn a_secret_file_loses_its_trailing_newline_and_may_not_be_empty() {
        let dir = std::env::temp_dir().join(format!("payorch-secret-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret");
        std::fs::write(&file, "sk_live_from_a_file\n").unwrap();
        assert_eq!(
            read_secret_file(&file).as_deref(),
            Ok("sk_live_from_a_file")
        );
        std::fs::write(&file, "\n").unwrap();
        assert!(read_secret_file(&file).unwrap_err().contains("empty"));
        assert!(read_secret_file(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}

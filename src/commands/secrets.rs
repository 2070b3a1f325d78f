//! What is kept sealed at rest — webhook-endpoint secrets — and the master keys that seal
//! it (docs/PRODUCTION.md, section 5): the keys `serve` uses, the clear secrets an older
//! version left sealed at its start, and `payorch secrets reencrypt`.

use super::{open_database, CommandError};
use crate::config::{ReencryptArgs, ServeArgs};
use crate::db::Database;
use crate::events::endpoints::sealed;
use crate::sealing::sources::{load_master_keys, WhenNoneGiven, MASTER_KEY_VARIABLE};
use crate::sealing::MasterKeys;

/// The master keys `serve` seals endpoint secrets with: given, or the demo's own
/// (docs/PRODUCTION.md, section 5).
pub(super) fn master_keys_of_serve(args: &ServeArgs) -> Result<MasterKeys, CommandError> {
    let none_given = if args.embedded_sandbox() {
        WhenNoneGiven::MakeOneInDataDir
    } else {
        WhenNoneGiven::Refuse
    };
    Ok(load_master_keys(
        args.master_key.master_key_file.as_deref(),
        std::env::var(MASTER_KEY_VARIABLE).ok(),
        &args.database.data_dir,
        none_given,
    )?)
}

/// Seals the endpoint secrets an older version kept in clear, before the server answers;
/// then, as the owner, has the database hold its CHECKs against a clear secret for every row.
pub(super) async fn seal_clear_endpoint_secrets(
    database: &Database,
    keys: &MasterKeys,
) -> Result<(), CommandError> {
    let mut conn = database.connect().await?;
    let sealed = sealed::seal_clear_secrets(&mut conn, keys).await?;
    if sealed > 0 {
        tracing::info!(
            endpoints = sealed,
            key = keys.sealing_id(),
            "sealed webhook-endpoint secrets kept in clear by an older version"
        );
    }
    // Every write is checked already; only the proof about old rows waits for the owner, so
    // an owner that cannot connect from here is a warning too, not a refusal to start.
    let validated = match crate::db::connect(database.migration_url()?).await {
        Ok(mut owner) => sealed::validate_sealed_checks(&mut owner)
            .await
            .map_err(|err| err.to_string()),
        Err(err) => Err(err.to_string()),
    };
    if let Err(err) = validated {
        tracing::warn!(
            error = %err,
            "could not validate the CHECKs against secrets in clear; run ALTER TABLE \
             webhook_endpoints VALIDATE CONSTRAINT … as the owner (docs/PRODUCTION.md, section 5)"
        );
    }
    Ok(())
}

/// `payorch secrets reencrypt`: every endpoint secret rewritten under the first master key.
pub(super) async fn reencrypt_secrets(args: ReencryptArgs) -> Result<(), CommandError> {
    let keys = load_master_keys(
        args.master_key.master_key_file.as_deref(),
        std::env::var(MASTER_KEY_VARIABLE).ok(),
        &args.database.data_dir,
        WhenNoneGiven::UseDataDirs,
    )?;
    let database = open_database(&args.database).await?;
    let result = async {
        let mut conn = database.connect().await?;
        Ok::<_, CommandError>(sealed::reseal_all(&mut conn, &keys).await?)
    }
    .await;
    database.shutdown().await?;
    let rewritten = result?;
    println!(
        "{rewritten} webhook endpoint(s) rewritten; every secret is sealed under master key `{}`: \
         the other keys can be dropped",
        keys.sealing_id()
    );
    Ok(())
}

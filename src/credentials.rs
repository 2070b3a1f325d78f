//! The demo account a fresh installation starts with, and `<data-dir>/credentials.json`,
//! which tells a developer (and the browser pages' tests) how to call this instance.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use diesel_async::{AsyncConnection, RunQueryDsl};
use serde::{Deserialize, Serialize};

use crate::accounts::{self, Caller, SupportRole};
use crate::db::PgConn;
use crate::ids::MerchantId;

pub const FILE_NAME: &str = "credentials.json";

/// Names the "bootstrap the demo account" critical section among advisory locks.
const BOOTSTRAP_LOCK_KEY: i64 = 0x7061_796f_7263_6802;

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Credentials {
    pub merchant_id: MerchantId,
    pub api_key: String,
    pub support_key: String,
    pub base_url: String,
    pub sandbox_url: Option<String>,
    pub webhook_secret: Option<String>,
}

/// The demo secrets, either made now (empty database) or read back from an earlier start.
#[derive(Clone)]
pub struct DemoAccount {
    pub merchant_id: MerchantId,
    pub api_key: String,
    pub support_key: String,
}

/// Names and ids only: the keys never show in `Debug` output.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("merchant_id", &self.merchant_id)
            .field("api_key", &REDACTED)
            .field("support_key", &REDACTED)
            .field("base_url", &self.base_url)
            .field("sandbox_url", &self.sandbox_url)
            .field(
                "webhook_secret",
                &self.webhook_secret.as_ref().map(|_| REDACTED),
            )
            .finish()
    }
}

impl std::fmt::Debug for DemoAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoAccount")
            .field("merchant_id", &self.merchant_id)
            .field("api_key", &REDACTED)
            .field("support_key", &REDACTED)
            .finish()
    }
}

const REDACTED: &str = "[redacted]";

/// The names the demo account's merchant and keys are made with; `--new-demo-keys` finds the
/// demo merchant by this name.
pub const DEMO_MERCHANT: &str = "Demo merchant";
const DEMO_SUPPORT: &str = "Demo support";

/// What `demo_account` does when the database already has merchants and no credentials file
/// that matches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMissingKeys {
    /// Leave the database alone (the keys are the operator's business).
    Leave,
    /// Mint a fresh API key for the demo merchant and a fresh support key (`--new-demo-keys`).
    MintNew,
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("database: {0}")]
    Database(#[from] diesel::result::Error),
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub fn path_in(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

pub fn read(path: &Path) -> Option<Credentials> {
    let text = fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// On an empty database, creates the demo merchant and support key. Otherwise takes the
/// secrets from the earlier credentials file, if it still matches this database, or mints
/// fresh ones when asked to.
///
/// New secrets are handed to `save` inside the transaction that creates them: if they cannot
/// be saved, nothing is committed, so the database never holds a demo key nobody can know.
pub async fn demo_account(
    conn: &mut PgConn,
    previous: Option<&Credentials>,
    on_missing: OnMissingKeys,
    save: impl FnOnce(&DemoAccount) -> Result<(), CredentialsError> + Send,
) -> Result<Option<DemoAccount>, CredentialsError> {
    let previous = previous.cloned();
    conn.transaction::<_, CredentialsError, _>(async move |conn| {
        // Replicas starting together on an empty database create one demo merchant.
        crate::db::advisory::xact_lock(BOOTSTRAP_LOCK_KEY)
            .execute(conn)
            .await?;
        let fresh = if !accounts::any_merchant_exists(conn).await? {
            let (merchant, key) = accounts::create_merchant(conn, DEMO_MERCHANT).await?;
            let support =
                accounts::create_support_key(conn, DEMO_SUPPORT, SupportRole::Operate).await?;
            DemoAccount {
                merchant_id: merchant.id,
                api_key: key.secret,
                support_key: support.secret,
            }
        } else if let Some(known) = still_valid(conn, previous).await? {
            // Nothing new: the file already holds these secrets.
            save(&known)?;
            return Ok(Some(known));
        } else if on_missing == OnMissingKeys::MintNew {
            let merchant_id = match accounts::oldest_merchant_named(conn, DEMO_MERCHANT).await? {
                Some(id) => id,
                None => accounts::create_merchant(conn, DEMO_MERCHANT).await?.0.id,
            };
            let key = accounts::create_merchant_key(conn, merchant_id, DEMO_MERCHANT).await?;
            let support =
                accounts::create_support_key(conn, DEMO_SUPPORT, SupportRole::Operate).await?;
            DemoAccount {
                merchant_id,
                api_key: key.secret,
                support_key: support.secret,
            }
        } else {
            return Ok(None);
        };
        save(&fresh)?;
        Ok(Some(fresh))
    })
    .await
}

/// The previous file's secrets, if both still authenticate as what the file says.
async fn still_valid(
    conn: &mut PgConn,
    previous: Option<Credentials>,
) -> Result<Option<DemoAccount>, diesel::result::Error> {
    let Some(previous) = previous else {
        return Ok(None);
    };
    let merchant_ok = matches!(
        accounts::authenticate(conn, &accounts::secret_hash(&previous.api_key)).await?.map(|k| k.caller),
        Some(Caller::Merchant { merchant_id, .. }) if merchant_id == previous.merchant_id
    );
    let support_ok = matches!(
        accounts::authenticate(conn, &accounts::secret_hash(&previous.support_key))
            .await?
            .map(|k| k.caller),
        Some(Caller::Support { .. })
    );
    Ok((merchant_ok && support_ok).then_some(DemoAccount {
        merchant_id: previous.merchant_id,
        api_key: previous.api_key,
        support_key: previous.support_key,
    }))
}

/// Writes the file readable by its owner only: it holds live secrets.
pub fn write(path: &Path, credentials: &Credentials) -> Result<(), CredentialsError> {
    let file_error = |source| CredentialsError::File {
        path: path.to_path_buf(),
        source,
    };
    let mut body = serde_json::to_vec_pretty(credentials)
        .map_err(|err| file_error(std::io::Error::other(err)))?;
    body.push(b'\n');
    // With `DATABASE_URL` nothing else makes the data folder; it holds secrets, so only its
    // owner may enter it.
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(file_error)?;
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(file_error)?;
    // An older file may have been created with wider permissions.
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(file_error)?;
    file.write_all(&body).map_err(file_error)
}

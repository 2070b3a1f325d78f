//! `payorch keys …`: the life of merchants' and support staff's keys (docs/operations/commands.md, "Commands").
//! A secret is printed once, when made; `list` never shows a secret nor its hash.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{with_connection, CommandError};
use crate::accounts::life::{self, KeyFilter, KeyInfo};
use crate::accounts::{KeyOwner, SupportRole};
use crate::config::{KeyIdArgs, KeysCommand, KeysCreateArgs, KeysListArgs, KeysRotateArgs};

pub(super) async fn run(command: KeysCommand) -> Result<(), CommandError> {
    match command {
        KeysCommand::List(args) => list(args).await,
        KeysCommand::Create(args) => create(args).await,
        KeysCommand::Revoke(args) => revoke(args).await,
        KeysCommand::Rotate(args) => rotate(args).await,
    }
}

async fn list(args: KeysListArgs) -> Result<(), CommandError> {
    let filter = match (args.merchant, args.support) {
        (Some(merchant), _) => KeyFilter::Merchant(merchant),
        (None, true) => KeyFilter::Support,
        (None, false) => KeyFilter::All,
    };
    let keys = with_connection(&args.database, async |conn| {
        Ok(life::list_keys(conn, filter).await?)
    })
    .await?;
    if args.json {
        println!("{}", serde_json::to_string(&keys)?);
        return Ok(());
    }
    let now = Utc::now();
    println!(
        "{:<40} {:<16} {:<40} {:<7} {:<20} {:<20} {:<20} {:<20} name",
        "id", "role", "merchant", "state", "created", "last used", "expires", "revoked"
    );
    for key in &keys {
        let role = match key.support_role {
            Some(role) => format!("support:{role}"),
            None => key.role.to_string(),
        };
        println!(
            "{:<40} {:<16} {:<40} {:<7} {:<20} {:<20} {:<20} {:<20} {}",
            key.id,
            role,
            key.merchant_id.map(|m| m.to_string()).unwrap_or_default(),
            state(key, now),
            when(Some(key.created_at)),
            when(key.last_used_at),
            when(key.expires_at),
            when(key.revoked_at),
            key.name
        );
    }
    Ok(())
}

fn state(key: &KeyInfo, now: DateTime<Utc>) -> &'static str {
    match (key.revoked_at, key.expires_at) {
        (Some(_), _) => "revoked",
        (None, Some(end)) if end <= now => "expired",
        _ => "live",
    }
}

fn when(at: Option<DateTime<Utc>>) -> String {
    at.map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| "-".into())
}

async fn create(args: KeysCreateArgs) -> Result<(), CommandError> {
    let owner = match args.merchant {
        Some(merchant) => KeyOwner::Merchant(merchant),
        None => KeyOwner::Support(args.role.unwrap_or(SupportRole::Read)),
    };
    let name = args.name.trim().to_string();
    let (key, new) = with_connection(&args.database, async |conn| {
        Ok(life::create_key(conn, owner, &name).await?)
    })
    .await?;
    if args.json {
        println!("{}", json!({"key": key, "secret": new.secret}));
    } else {
        print_made(&key);
        println!("secret (shown once, keep it secret): {}", new.secret);
    }
    Ok(())
}

fn print_made(key: &KeyInfo) {
    match (key.merchant_id, key.support_role) {
        (Some(merchant), _) => println!("key {} for merchant {merchant} ({})", key.id, key.name),
        (None, Some(role)) => println!("support key {} ({}, role {role})", key.id, key.name),
        (None, None) => println!("key {} ({})", key.id, key.name),
    }
}

async fn revoke(args: KeyIdArgs) -> Result<(), CommandError> {
    let id = args.key_id;
    let key = with_connection(&args.database, async |conn| {
        Ok(life::revoke_key(conn, id).await?)
    })
    .await?;
    if args.json {
        println!("{}", json!({ "key": key }));
    } else {
        println!(
            "key {} ({}) revoked at {}; every replica refuses it within a second",
            key.id,
            key.name,
            when(key.revoked_at)
        );
    }
    Ok(())
}

async fn rotate(args: KeysRotateArgs) -> Result<(), CommandError> {
    let id = args.key.key_id;
    let overlap = Duration::from_secs(args.overlap_secs);
    let (old, made, new) = with_connection(&args.key.database, async |conn| {
        Ok(life::rotate_key(conn, id, overlap).await?)
    })
    .await?;
    if args.key.json {
        println!("{}", json!({"old": old, "key": made, "secret": new.secret}));
    } else {
        print_made(&made);
        println!("secret (shown once, keep it secret): {}", new.secret);
        println!(
            "the old key {} works until {}, then is refused as if revoked",
            old.id,
            when(old.expires_at)
        );
    }
    Ok(())
}

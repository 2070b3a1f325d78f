//! Where the master keys come from (docs/PRODUCTION.md, section 5): `--master-key-file`
//! (`PAYORCH_MASTER_KEY_FILE`) or the environment variable `PAYORCH_MASTER_KEY`, never the
//! command line (where `ps` shows it). The demo, which has neither, keeps one in its data
//! folder beside `credentials.json`, made at its first start; a real deployment must name
//! its own, or it keeps its secrets under a key that sits on the same disk as the database.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{MasterKeyError, MasterKeys};

/// The environment variable that may hold the master keys.
pub const MASTER_KEY_VARIABLE: &str = "PAYORCH_MASTER_KEY";
/// The demo's master key file, in its data folder.
pub const DEMO_KEY_FILE: &str = "master_key";

/// What to do when no master key is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNoneGiven {
    /// The demo: use the data folder's key, made now if there is none.
    MakeOneInDataDir,
    /// A command on the demo's data: use the data folder's key if it has one.
    UseDataDirs,
    /// A real deployment: refuse to start.
    Refuse,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("no master key: a real provider needs one to keep webhook-endpoint secrets sealed. Make one with `echo \"k1:$(head -c 32 /dev/urandom | base64)\" > master_key && chmod 600 master_key` and give it as --master-key-file (PAYORCH_MASTER_KEY_FILE) or in PAYORCH_MASTER_KEY (docs/PRODUCTION.md, section 5){demo}")]
    NoneGiven { demo: String },
    #[error("the master keys are given both in PAYORCH_MASTER_KEY and as --master-key-file: give them one way")]
    GivenTwice,
    #[error("master key file {path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: {source}")]
    Refused {
        origin: String,
        #[source]
        source: MasterKeyError,
    },
}

/// The master keys from `file` or `variable` (the value of [`MASTER_KEY_VARIABLE`]), else
/// as `none_given` says, the demo's file being `data_dir`/[`DEMO_KEY_FILE`].
pub fn load_master_keys(
    file: Option<&Path>,
    variable: Option<String>,
    data_dir: &Path,
    none_given: WhenNoneGiven,
) -> Result<MasterKeys, SourceError> {
    let variable = variable.filter(|v| !v.trim().is_empty());
    match (file, variable) {
        (Some(_), Some(_)) => Err(SourceError::GivenTwice),
        (Some(path), None) => read_file(path),
        (None, Some(text)) => parse(&text, MASTER_KEY_VARIABLE.to_owned()),
        (None, None) => {
            let demo = data_dir.join(DEMO_KEY_FILE);
            match none_given {
                WhenNoneGiven::MakeOneInDataDir => read_or_make(&demo),
                WhenNoneGiven::UseDataDirs if demo.exists() => read_file(&demo),
                WhenNoneGiven::UseDataDirs | WhenNoneGiven::Refuse => Err(SourceError::NoneGiven {
                    demo: if demo.exists() {
                        format!(
                                "; the demo's key is {}: name it with --master-key-file to keep using it",
                                demo.display()
                            )
                    } else {
                        String::new()
                    },
                }),
            }
        }
    }
}

fn parse(text: &str, origin: String) -> Result<MasterKeys, SourceError> {
    MasterKeys::parse(text).map_err(|source| SourceError::Refused { origin, source })
}

fn read_file(path: &Path) -> Result<MasterKeys, SourceError> {
    let text = fs::read_to_string(path).map_err(|source| SourceError::File {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path.display().to_string())
}

/// The demo's key: read, or made and written readable by its owner only. Written whole to a
/// file of its own, then hard-linked into place, which fails if the key exists: of two starts
/// at once, one makes the key and the other reads it, never a file still being written.
fn read_or_make(path: &Path) -> Result<MasterKeys, SourceError> {
    let file_error = |source| SourceError::File {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        return read_file(path);
    }
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(file_error)?;
    }
    let id = format!("demo-{}", hex::encode(rand::random::<[u8; 4]>()));
    let (keys, text) = MasterKeys::generate(&id);
    let mut draft = path.as_os_str().to_owned();
    draft.push(format!(".{id}.new"));
    let draft = PathBuf::from(draft);
    let written = write_new(&draft, &text).and_then(|()| fs::hard_link(&draft, path));
    // The draft goes whatever happened; the key, if linked, stays under its own name.
    let _ = fs::remove_file(&draft);
    match written {
        Ok(()) => {
            tracing::info!(path = %path.display(), key = id, "made the demo's master key");
            Ok(keys)
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => read_file(path),
        Err(err) => Err(file_error(err)),
    }
}

/// `text` and a newline in a new file at `path`, readable by its owner only, on disk.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(format!("{text}\n").as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn folder(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "payorch-master-key-{label}-{}",
            uuid::Uuid::now_v7()
        ));
        fs::create_dir_all(&dir).expect("a temp folder");
        dir
    }

    #[test]
    fn the_demo_makes_its_key_once_readable_by_its_owner_only() {
        let dir = folder("demo");
        let first =
            load_master_keys(None, None, &dir, WhenNoneGiven::MakeOneInDataDir).expect("made");
        let path = dir.join(DEMO_KEY_FILE);
        let mode = fs::metadata(&path).expect("the file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again =
            load_master_keys(None, None, &dir, WhenNoneGiven::MakeOneInDataDir).expect("read back");
        assert_eq!(again.sealing_id(), first.sealing_id());
        let sealed = first.seal("whsec_x", "ctx");
        assert_eq!(again.open(&sealed, "ctx").as_deref(), Ok("whsec_x"));
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn demo_starts_at_once_all_read_the_one_key_made() {
        for round in 0..50 {
            let dir = folder(&format!("race-{round}"));
            let start = std::sync::Barrier::new(8);
            let ids: Vec<Result<String, String>> = std::thread::scope(|scope| {
                let starts: Vec<_> = (0..8)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            load_master_keys(None, None, &dir, WhenNoneGiven::MakeOneInDataDir)
                                .map(|keys| keys.sealing_id().to_owned())
                                .map_err(|err| err.to_string())
                        })
                    })
                    .collect();
                starts
                    .into_iter()
                    .map(|s| s.join().expect("a start"))
                    .collect()
            });
            let first = ids[0].clone().expect("a key");
            assert!(ids.iter().all(|id| id.as_ref() == Ok(&first)), "{ids:?}");
            let files = fs::read_dir(&dir).expect("the folder").count();
            assert_eq!(files, 1, "only the key is left in the folder");
            let _ = fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn a_real_deployment_without_a_key_is_refused_with_how_to_make_one() {
        let dir = folder("real");
        let err = load_master_keys(None, None, &dir, WhenNoneGiven::Refuse)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("head -c 32 /dev/urandom | base64"), "{err}");
        assert!(err.contains("PAYORCH_MASTER_KEY"), "{err}");
        assert!(!dir.join(DEMO_KEY_FILE).exists());
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn keys_come_from_the_variable_or_the_file_and_not_both() {
        let dir = folder("given");
        let (_, text) = MasterKeys::generate("k7");
        let keys = load_master_keys(None, Some(text.clone()), &dir, WhenNoneGiven::Refuse)
            .expect("from the variable");
        assert_eq!(keys.sealing_id(), "k7");
        let path = dir.join("keys");
        fs::write(&path, format!("{text}\n")).expect("written");
        let keys = load_master_keys(Some(&path), None, &dir, WhenNoneGiven::Refuse)
            .expect("from the file");
        assert_eq!(keys.sealing_id(), "k7");
        assert!(matches!(
            load_master_keys(Some(&path), Some(text), &dir, WhenNoneGiven::Refuse),
            Err(SourceError::GivenTwice)
        ));
        let bad = load_master_keys(None, Some("k1:short".into()), &dir, WhenNoneGiven::Refuse)
            .expect_err("refused")
            .to_string();
        assert!(bad.starts_with("PAYORCH_MASTER_KEY: "), "{bad}");
        assert!(
            !bad.contains("short"),
            "the key's text stays out of the error: {bad}"
        );
        let _ = fs::remove_dir_all(dir);
    }
}

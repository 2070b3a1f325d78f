//! Logging (`tracing` to stderr, human-readable or JSON lines; `RUST_LOG` filters, default
//! info; with `spans`, each span's close and its time too) and the metrics registry.
//! Human-readable lines are coloured only on a terminal, and never under `NO_COLOR`.

pub mod metrics;
pub mod once_a_second;

use std::io::IsTerminal;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::{fmt, EnvFilter};

/// The target of the write path's spans (`idempotency.claim`, `db.statement`,
/// `provider.call`), at `debug`: off by default, so a request pays nothing for them; on with
/// `--log-spans` or `RUST_LOG=payorch::trace=debug` (docs/operations/monitoring.md, "Tracing").
pub const TRACE: &str = "payorch::trace";

pub fn init(json: bool, spans: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let filter = if spans {
        filter.add_directive(format!("{TRACE}=debug").parse().expect("a directive"))
    } else {
        filter
    };
    let closes = if spans { FmtSpan::CLOSE } else { FmtSpan::NONE };
    let builder = fmt()
        .with_env_filter(filter)
        .with_span_events(closes)
        .with_ansi(coloured(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .with_writer(std::io::stderr);
    // A second init (tests building several apps) keeps the first subscriber.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

/// Whether log lines carry ANSI colours: only for a person at a terminal. Logs sent to a
/// file, a pipe or journald keep plain text, which `grep` and log shippers read as written;
/// and a `NO_COLOR` that is set and not empty turns colours off anywhere (no-color.org's
/// convention, which an operator's other tools follow too).
fn coloured(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|value| value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::coloured;

    #[test]
    fn colours_only_on_a_terminal_and_not_under_no_color() {
        assert!(coloured(true, None));
        assert!(!coloured(false, None), "a file or a pipe gets plain text");
        assert!(!coloured(true, Some("1".into())));
        assert!(!coloured(false, Some("1".into())));
        // The convention: set to an empty string is as if unset.
        assert!(coloured(true, Some("".into())));
    }
}

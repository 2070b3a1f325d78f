//! Logging (`tracing` to stderr, human-readable or JSON lines; `RUST_LOG` filters, default
//! info; with `spans`, each span's close and its time too) and the metrics registry.

pub mod metrics;
pub mod once_a_second;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::{fmt, EnvFilter};

/// The target of the write path's spans (`idempotency.claim`, `db.statement`,
/// `provider.call`), at `debug`: off by default, so a request pays nothing for them; on with
/// `--log-spans` or `RUST_LOG=payorch::trace=debug` (README, "Tracing").
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
        .with_writer(std::io::stderr);
    // A second init (tests building several apps) keeps the first subscriber.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

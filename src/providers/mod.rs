//! Payment provider adapters.

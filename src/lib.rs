//! payorch: payment orchestration with one promise — one intent of the payer, at most one charge.

pub mod providers;
pub mod sandbox;

//! The payment domain: money, orders and their state machine.

pub mod money;
pub mod orders;

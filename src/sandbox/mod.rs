//! The provider simulator.

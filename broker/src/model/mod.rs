//! Vocabulary shared by every layer: newtypes for the numbers that must never be confused, and
//! the named limits in [`limits`].

pub mod limits;

//! Power-sum quACKs (Sidekick, NSDI '24, §3).
//!
//! A quACK summarises a multiset of opaque packet identifiers as `t` power sums modulo a prime,
//! a count and the last element. Subtracting the receiver's quACK from the sender's and solving
//! Newton's identities yields the identifiers that are missing, as long as at most `t` are.

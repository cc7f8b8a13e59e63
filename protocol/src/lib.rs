//! The sidekick wire protocol (Sidekick NSDI '24 §4.1–4.2, Packrat CoNEXT '26 §6.1).
//!
//! Discovery markers sent inline on the base connection's 4-tuple, the messages exchanged between
//! a client and a proxy on the sidekick socket, session identifiers, authentication and the quota
//! that bounds what a proxy may send. Used by the proxy and the client SDK alike.

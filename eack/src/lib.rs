//! eACKs built on rateless invertible Bloom lookup tables (Packrat, CoNEXT '26, §5).
//!
//! A receiver summarises the identifiers of the datagrams it received as a prefix of an infinite
//! stream of coded symbols; the proxy subtracts the sketch from its own view and peels the
//! difference to learn which cached packets to retransmit.

//! C API over the sidekick client SDK's sans-IO engines and datagram hooks.
//!
//! Builds a static and a shared library with a cbindgen-generated header, for C clients such as
//! curl or nginx builds that link the sidekick without patching the QUIC stack.

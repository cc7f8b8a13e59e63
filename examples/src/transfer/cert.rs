//! Self-signed certificates for the example servers (rcgen), in DER for quinn and as temporary PEM
//! files for quiche's `load_cert_chain_from_pem_file`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// A freshly generated self-signed certificate for `localhost` and its private key.
pub struct SelfSigned {
    /// Certificate, DER.
    pub cert_der: Vec<u8>,
    /// PKCS#8 private key, DER.
    pub key_der: Vec<u8>,
    /// Certificate, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
}

impl SelfSigned {
    /// Generate a new certificate with subject alternative names `localhost` and `sidekick`.
    pub fn generate() -> anyhow::Result<Self> {
        let ck =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "sidekick".to_owned()])
                .context("generating self-signed certificate")?;
        Ok(Self {
            cert_der: ck.cert.der().to_vec(),
            key_der: ck.signing_key.serialize_der(),
            cert_pem: ck.cert.pem(),
            key_pem: ck.signing_key.serialize_pem(),
        })
    }

    /// Write certificate and key as PEM files into `dir`; the returned guard deletes them on drop.
    pub fn write_pem_files(&self, dir: &Path) -> anyhow::Result<PemFiles> {
        let stamp = format!(
            "{}-{}",
            std::process::id(),
            super::unix_ns(std::time::SystemTime::now())
        );
        let cert = dir.join(format!("sidekick-transfer-{stamp}.crt.pem"));
        let key = dir.join(format!("sidekick-transfer-{stamp}.key.pem"));
        let files = PemFiles { cert, key };
        std::fs::write(&files.cert, &self.cert_pem)
            .with_context(|| format!("writing {}", files.cert.display()))?;
        std::fs::write(&files.key, &self.key_pem)
            .with_context(|| format!("writing {}", files.key.display()))?;
        Ok(files)
    }
}

/// Temporary PEM files, removed on drop.
pub struct PemFiles {
    /// Certificate path.
    pub cert: PathBuf,
    /// Key path.
    pub key: PathBuf,
}

impl Drop for PemFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.cert);
        let _ = std::fs::remove_file(&self.key);
    }
}

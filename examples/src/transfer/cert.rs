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
        Self::generate_padded(0)
    }

    /// Like [`generate`](Self::generate), padded to at least `min_der_bytes` of DER (0: no
    /// padding) with a non-critical private extension (an OCTET STRING of zeros), so that the
    /// server's first flight can be made to exceed the anti-amplification limit (3× the client's
    /// Initial, RFC 9000 §8.1): ReACKed QUICer (IMC '24) §3 used a 5113 B certificate. The
    /// result is at most 4 bytes longer than asked (ECDSA signatures vary in length).
    ///
    /// ```
    /// let c = sidekick_examples::transfer::cert::SelfSigned::generate_padded(5113).unwrap();
    /// assert!((5113..=5117).contains(&c.cert_der.len()), "{}", c.cert_der.len());
    /// ```
    pub fn generate_padded(min_der_bytes: usize) -> anyhow::Result<Self> {
        let key = rcgen::KeyPair::generate().context("generating key")?;
        let mut pad = 0usize;
        for _ in 0..8 {
            let mut params =
                rcgen::CertificateParams::new(vec!["localhost".to_owned(), "sidekick".to_owned()])
                    .context("certificate parameters")?;
            if pad > 0 {
                params
                    .custom_extensions
                    .push(rcgen::CustomExtension::from_oid_content(
                        PAD_OID,
                        der_octet_string(pad),
                    ));
            }
            let cert = params.self_signed(&key).context("self-signing")?;
            let len = cert.der().len();
            if len >= min_der_bytes && (min_der_bytes == 0 || len <= min_der_bytes + 4) {
                return Ok(Self {
                    cert_der: cert.der().to_vec(),
                    key_der: key.serialize_der(),
                    cert_pem: cert.pem(),
                    key_pem: key.serialize_pem(),
                });
            }
            // Adjust the padding by the difference (DER length fields shift it by a few bytes;
            // the loop converges in two or three rounds).
            pad = if len < min_der_bytes {
                pad + (min_der_bytes - len).max(1)
            } else {
                pad.saturating_sub(len - min_der_bytes - 1)
            };
            if pad == 0 {
                pad = 1;
            }
        }
        anyhow::bail!("could not pad the certificate to {min_der_bytes} bytes")
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

/// Private-use OID of the padding extension (under the example arc 1.3.6.1.4.1.55555).
const PAD_OID: &[u64] = &[1, 3, 6, 1, 4, 1, 55555, 1];

/// DER of an OCTET STRING of `n` zero bytes.
fn der_octet_string(n: usize) -> Vec<u8> {
    let mut v = vec![0x04];
    if n < 0x80 {
        v.push(n as u8);
    } else {
        let b = n.to_be_bytes();
        let skip = b.iter().take_while(|x| **x == 0).count();
        v.push(0x80 | (b.len() - skip) as u8);
        v.extend_from_slice(&b[skip..]);
    }
    v.resize(v.len() + n, 0);
    v
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

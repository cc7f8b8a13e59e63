//! Key-log lines (NSS key-log format) as QUIC stacks export them: the 1-RTT traffic secrets the
//! lens derives its header-protection keys from.

/// Errors parsing a key-log line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyLogError {
    /// The line does not have three space-separated fields.
    #[error("key-log line does not have three fields")]
    Fields,
    /// A label this lens does not use (comments, TLS 1.2 lines, …).
    #[error("unknown key-log label {0:?}")]
    UnknownLabel(String),
    /// A field is not valid hexadecimal.
    #[error("key-log field is not hexadecimal")]
    Hex,
    /// The client random is not 32 bytes.
    #[error("client random has {0} bytes, expected 32")]
    ClientRandom(usize),
    /// The secret is neither 32 (SHA-256) nor 48 (SHA-384) bytes.
    #[error("secret has {0} bytes, expected 32 or 48")]
    SecretLength(usize),
}

/// The key-log labels of TLS 1.3 secrets (NSS key-log format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyLogLabel {
    /// `CLIENT_EARLY_TRAFFIC_SECRET` (0-RTT).
    ClientEarlyTrafficSecret,
    /// `CLIENT_HANDSHAKE_TRAFFIC_SECRET`.
    ClientHandshakeTrafficSecret,
    /// `SERVER_HANDSHAKE_TRAFFIC_SECRET`.
    ServerHandshakeTrafficSecret,
    /// `CLIENT_TRAFFIC_SECRET_0`: client-to-server 1-RTT packets.
    ClientTrafficSecret0,
    /// `SERVER_TRAFFIC_SECRET_0`: server-to-client 1-RTT packets.
    ServerTrafficSecret0,
    /// `EXPORTER_SECRET`.
    ExporterSecret,
}

impl KeyLogLabel {
    /// The label for its key-log name.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "CLIENT_EARLY_TRAFFIC_SECRET" => Self::ClientEarlyTrafficSecret,
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET" => Self::ClientHandshakeTrafficSecret,
            "SERVER_HANDSHAKE_TRAFFIC_SECRET" => Self::ServerHandshakeTrafficSecret,
            "CLIENT_TRAFFIC_SECRET_0" => Self::ClientTrafficSecret0,
            "SERVER_TRAFFIC_SECRET_0" => Self::ServerTrafficSecret0,
            "EXPORTER_SECRET" => Self::ExporterSecret,
            _ => return None,
        })
    }
}

/// One parsed key-log line.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyLogEntry {
    /// Which secret.
    pub label: KeyLogLabel,
    /// The TLS client random naming the connection.
    pub client_random: [u8; 32],
    /// The secret (32 or 48 bytes).
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for KeyLogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        f.debug_struct("KeyLogEntry")
            .field("label", &self.label)
            .field("client_random", &hex::encode(self.client_random))
            .field("secret_len", &self.secret.len())
            .finish()
    }
}

/// Parses one NSS key-log line `LABEL <client random hex> <secret hex>`.
pub fn parse_keylog_line(line: &str) -> Result<KeyLogEntry, KeyLogError> {
    let mut fields = line.split_ascii_whitespace();
    let (Some(label), Some(random), Some(secret), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(KeyLogError::Fields);
    };
    let label =
        KeyLogLabel::from_name(label).ok_or_else(|| KeyLogError::UnknownLabel(label.into()))?;
    let random = hex::decode(random).map_err(|_| KeyLogError::Hex)?;
    let client_random: [u8; 32] = random
        .as_slice()
        .try_into()
        .map_err(|_| KeyLogError::ClientRandom(random.len()))?;
    let secret = hex::decode(secret).map_err(|_| KeyLogError::Hex)?;
    if secret.len() != 32 && secret.len() != 48 {
        return Err(KeyLogError::SecretLength(secret.len()));
    }
    Ok(KeyLogEntry {
        label,
        client_random,
        secret,
    })
}

/// Fuzz body: parsing arbitrary bytes as key-log text never panics.
pub fn fuzz_keylog(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            let _ = parse_keylog_line(line);
        }
    }
}

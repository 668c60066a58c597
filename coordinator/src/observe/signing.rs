//! Webhook signatures: a receiver can tell a delivery came from a coordinator holding the
//! shared key, and that it is fresh.
//!
//! Each attempt carries `X-Cronstable-Timestamp: <Unix seconds>` and
//! `X-Cronstable-Signature: v1=<hex>`, the HMAC-SHA256 under the key of the timestamp, a dot
//! and the exact body bytes, the scheme Stripe and Slack use. A retry is signed anew with its
//! own timestamp, so a receiver can refuse anything older than a few minutes (a replay)
//! without refusing a late retry. HMAC (RFC 2104) is written out over `sha2`, which the
//! project already uses, and checked against the RFC 4231 test vectors.

use std::sync::Arc;

use sha2::{Digest, Sha256};

/// The header with the signing time.
pub const TIMESTAMP_HEADER: &str = "X-Cronstable-Timestamp";

/// The header with the signature.
pub const SIGNATURE_HEADER: &str = "X-Cronstable-Signature";

/// The shortest key accepted, in bytes: what `openssl rand -hex 16` prints.
pub const MIN_KEY_BYTES: usize = 32;

/// SHA-256's block size, which HMAC pads the key to.
const BLOCK: usize = 64;

/// A webhook signing key. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Arc<[u8]>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({} bytes)", self.0.len())
    }
}

impl SigningKey {
    /// A key from its bytes.
    pub fn new(bytes: &[u8]) -> Self {
        Self(bytes.into())
    }

    /// The two headers for `body` signed at `timestamp` (Unix seconds).
    pub fn headers(&self, timestamp: i64, body: &[u8]) -> [(&'static str, String); 2] {
        let mut message = timestamp.to_string().into_bytes();
        message.push(b'.');
        message.extend_from_slice(body);
        [
            (TIMESTAMP_HEADER, timestamp.to_string()),
            (
                SIGNATURE_HEADER,
                format!("v1={}", hex::encode(hmac_sha256(&self.0, &message))),
            ),
        ]
    }
}

/// Why a configured signing key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Its source could not be read.
    #[error("{0}")]
    Source(#[from] crate::config::SecretError),
    /// It is too short to resist guessing.
    #[error("the key is {0} bytes; at least {MIN_KEY_BYTES} (`openssl rand -hex 16` prints one)")]
    TooShort(usize),
}

/// The signing key from `source` (`notify.webhook.signingKey`), read with `env` for
/// `fromEnvVar`; trailing whitespace is not part of it.
pub fn resolve(
    source: Option<&crate::config::SecretSource>,
    env: &crate::Environment,
) -> Result<Option<SigningKey>, KeyError> {
    let Some(source) = source else {
        return Ok(None);
    };
    let text = source.resolve(&|k| env.get(k), &|f| std::fs::read_to_string(f))?;
    let key = text.trim_end();
    if key.len() < MIN_KEY_BYTES {
        return Err(KeyError::TooShort(key.len()));
    }
    Ok(Some(SigningKey::new(key.as_bytes())))
}

/// HMAC-SHA256 of `message` under `key` (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test cases 1, 2, 6 (a key longer than a block) and 7.
    #[test]
    fn rfc_4231_vectors() {
        let cases: [(&[u8], &[u8], &str); 4] = [
            (
                &[0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
            (
                &[0xaa; 131],
                b"This is a test using a larger than block-size key and a larger than \
                  block-size data. The key needs to be hashed before being used by the \
                  HMAC algorithm.",
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
            ),
        ];
        for (key, message, expected) in cases {
            assert_eq!(hex::encode(hmac_sha256(key, message)), expected);
        }
    }

    #[test]
    fn a_key_is_resolved_trimmed_and_long_enough_or_refused() {
        use crate::config::SecretSource;
        let env = crate::Environment::from_vars([
            (
                "K".to_owned(),
                "0123456789abcdef0123456789abcdef\n".to_owned(),
            ),
            ("SHORT".to_owned(), "abc".to_owned()),
        ]);
        let key = resolve(Some(&SecretSource::FromEnvVar("K".into())), &env).unwrap();
        assert_eq!(
            key,
            Some(SigningKey::new(b"0123456789abcdef0123456789abcdef"))
        );
        let short = resolve(Some(&SecretSource::FromEnvVar("SHORT".into())), &env);
        assert!(matches!(short, Err(KeyError::TooShort(3))), "{short:?}");
        let unset = resolve(Some(&SecretSource::FromEnvVar("NOPE".into())), &env);
        assert!(unset.unwrap_err().to_string().contains("NOPE"));
        assert!(resolve(None, &env).unwrap().is_none());
    }

    #[test]
    fn the_signature_covers_the_timestamp_and_the_body() {
        let key = SigningKey::new(b"0123456789abcdef0123456789abcdef");
        let [(t, ts), (s, sig)] = key.headers(1_765_000_000, b"{\"event\":\"x\"}");
        assert_eq!((t, ts.as_str()), (TIMESTAMP_HEADER, "1765000000"));
        assert_eq!(s, SIGNATURE_HEADER);
        let expected = hmac_sha256(
            b"0123456789abcdef0123456789abcdef",
            b"1765000000.{\"event\":\"x\"}",
        );
        assert_eq!(sig, format!("v1={}", hex::encode(expected)));
        let [_, (_, other)] = key.headers(1_765_000_001, b"{\"event\":\"x\"}");
        assert_ne!(sig, other, "a new timestamp, a new signature");
        assert_eq!(format!("{key:?}"), "SigningKey(32 bytes)");
    }
}

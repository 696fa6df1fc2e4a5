//! Credentials at rest in the shared store: XChaCha20-Poly1305 (RustCrypto
//! `chacha20poly1305`) with a 32-byte key from `AAI_STORE_KEY` or `store.keyFile`, a random
//! 24-byte nonce per write, and the account (`app` or `app#NAME`) as associated data, so a
//! row copied onto another account does not open. The key never reaches the database; its
//! id (a hash) does, so that a wrong key is named as such.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::Digest;

use crate::store::Error;

/// The environment variable holding the key.
pub(crate) const KEY_VAR: &str = "AAI_STORE_KEY";

/// The credential key. `Debug` shows its id only.
#[derive(Clone)]
pub struct Key {
    bytes: [u8; 32],
    id: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({})", self.id)
    }
}

/// A sealed value: the nonce and the ciphertext (with its tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// 24 random bytes.
    pub nonce: Vec<u8>,
    /// The ciphertext and its 16-byte tag.
    pub sealed: Vec<u8>,
}

impl Key {
    /// The key from `file`, else from `AAI_STORE_KEY` (`env` reads the environment).
    pub fn load(
        file: Option<&std::path::Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Key, Error> {
        if let Some(file) = file {
            let text = std::fs::read_to_string(file).map_err(|why| Error::KeyFile {
                path: file.to_owned(),
                why,
            })?;
            return Key::parse(&text).map_err(|why| Error::BadKey {
                from: file.display().to_string(),
                why,
            });
        }
        match env(KEY_VAR) {
            Some(text) if !text.trim().is_empty() => {
                Key::parse(&text).map_err(|why| Error::BadKey {
                    from: KEY_VAR.to_owned(),
                    why,
                })
            }
            _ => Err(Error::NoKey),
        }
    }

    /// 32 bytes as 64 hex digits or base64 (standard or URL-safe, padded or not).
    pub fn parse(text: &str) -> Result<Key, &'static str> {
        use base64::Engine as _;
        let text = text.trim();
        let bytes: Vec<u8> = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex digits"))
                .collect()
        } else {
            let engines = [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::STANDARD_NO_PAD,
                base64::engine::general_purpose::URL_SAFE,
                base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            engines
                .iter()
                .find_map(|e| e.decode(text).ok())
                .ok_or("is neither 64 hex digits nor base64")?
        };
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "must be 32 bytes (64 hex digits, or 44 characters of base64)")?;
        if bytes.iter().all(|b| *b == bytes[0]) {
            return Err("is not random (every byte is the same)");
        }
        let mut hash = sha2::Sha256::new();
        hash.update(b"aai-gateway store key id\0");
        hash.update(bytes);
        let id = crate::text::hex(&hash.finalize()[..6]);
        Ok(Key { bytes, id })
    }

    /// The key's id: a hash, safe to store and show.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `clear` sealed for `account`.
    pub fn seal(&self, account: &str, clear: &[u8]) -> Sealed {
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).expect("the OS has randomness");
        let sealed = self
            .cipher()
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: clear,
                    aad: &aad(account),
                },
            )
            .expect("XChaCha20-Poly1305 seals any length this store keeps");
        Sealed {
            nonce: nonce.to_vec(),
            sealed,
        }
    }

    /// The clear value of `sealed`, stored for `account` with the key `key_id`; an error
    /// (never garbage) for another key, another account or a changed byte.
    pub fn open(&self, account: &str, key_id: &str, sealed: &Sealed) -> Result<Vec<u8>, Error> {
        if key_id != self.id {
            return Err(Error::WrongKey {
                account: account.to_owned(),
                stored: key_id.to_owned(),
                ours: self.id.clone(),
            });
        }
        let nonce: [u8; 24] = sealed
            .nonce
            .as_slice()
            .try_into()
            .map_err(|_| Error::Decrypt(account.to_owned()))?;
        self.cipher()
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &sealed.sealed,
                    aad: &aad(account),
                },
            )
            .map_err(|_| Error::Decrypt(account.to_owned()))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new((&self.bytes).into())
    }
}

/// What a sealed value is bound to: its purpose and account (app id and name).
fn aad(account: &str) -> Vec<u8> {
    let mut aad = b"aai-gateway credential v1\0".to_vec();
    aad.extend_from_slice(account.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_sealed_value_opens_for_its_account_and_key_only() {
        let key = Key::parse(HEX).unwrap();
        let sealed = key.seal("com.a#TOKEN", b"s3cret-value");
        assert!(
            !sealed
                .sealed
                .windows(b"s3cret-value".len())
                .any(|w| w == b"s3cret-value")
        );
        assert_eq!(
            key.open("com.a#TOKEN", key.id(), &sealed).unwrap(),
            b"s3cret-value"
        );
        // Another row's account: the associated data differs.
        assert!(matches!(
            key.open("com.b#TOKEN", key.id(), &sealed),
            Err(Error::Decrypt(_))
        ));
        // A changed byte.
        let mut bad = sealed.clone();
        bad.sealed[0] ^= 1;
        assert!(matches!(
            key.open("com.a#TOKEN", key.id(), &bad),
            Err(Error::Decrypt(_))
        ));
        // Another key: named as such, before any decryption.
        let other = Key::parse(&HEX.replace("1f", "20")).unwrap();
        let e = other.open("com.a#TOKEN", key.id(), &sealed).unwrap_err();
        assert!(matches!(e, Error::WrongKey { .. }));
        assert!(e.to_string().contains("another key"), "{e}");
        // Another key under a forged id: the tag still refuses it.
        assert!(matches!(
            other.open("com.a#TOKEN", other.id(), &sealed),
            Err(Error::Decrypt(_))
        ));
        // Nonces are fresh.
        assert_ne!(key.seal("a", b"x").nonce, key.seal("a", b"x").nonce);
    }

    #[test]
    fn keys_are_read_as_hex_or_base64_and_refused_otherwise() {
        use base64::Engine as _;
        let bytes: Vec<u8> = (0u8..32).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert_eq!(
            Key::parse(HEX).unwrap().id(),
            Key::parse(&format!("{b64}\n")).unwrap().id()
        );
        assert!(Key::parse("abcd").is_err());
        assert!(Key::parse(&"00".repeat(32)).is_err(), "not random");
        assert!(Key::parse(&"zz".repeat(32)).is_err());
        let none = |_: &str| None;
        assert!(matches!(Key::load(None, &none), Err(Error::NoKey)));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, format!("{HEX}\n")).unwrap();
        assert!(Key::load(Some(&file), &none).is_ok());
        let bad = |_: &str| Some("short".to_owned());
        let e = Key::load(None, &bad).unwrap_err();
        assert!(e.to_string().contains(KEY_VAR) && !e.to_string().contains("short"));
    }
}

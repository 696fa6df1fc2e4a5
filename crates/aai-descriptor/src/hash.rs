//! A stable hash (64-bit FNV-1a): the same on every platform and Rust version, unlike
//! `std`'s hasher, so it can name things that outlive one process — the gateway's slug
//! suffixes that clients see, and the fingerprints left beside generated descriptors.

/// The FNV-1a hash of `text`.
pub fn stable(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        assert_eq!(super::stable(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::stable("a"), 0xaf63_dc4c_8601_ec8c);
    }
}

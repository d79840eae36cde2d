//! How a signature is written in a header: hex or base64.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The text encoding of a signature in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encoding {
    /// Hexadecimal, either case when read, lowercase when written (Stripe, GitHub).
    Hex,
    /// Standard base64 (RFC 4648 §4) with padding (Shopify, Standard Webhooks).
    Base64,
}

impl Encoding {
    pub(crate) fn encode(self, bytes: &[u8]) -> String {
        match self {
            Self::Hex => hex::encode(bytes),
            Self::Base64 => STANDARD.encode(bytes),
        }
    }

    /// The bytes `text` encodes, or `None` when it is not valid in this encoding.
    pub(crate) fn decode(self, text: &str) -> Option<Vec<u8>> {
        match self {
            Self::Hex => hex::decode(text).ok(),
            Self::Base64 => STANDARD.decode(text).ok(),
        }
    }

    /// What the signature looks like, for error messages.
    pub(crate) fn placeholder(self) -> &'static str {
        match self {
            Self::Hex => "<hex>",
            Self::Base64 => "<base64>",
        }
    }

    /// The problem reported when no signature decodes.
    pub(crate) fn invalid(self) -> &'static str {
        match self {
            Self::Hex => "the signature is not valid hex",
            Self::Base64 => "the signature is not valid base64",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        for encoding in [Encoding::Hex, Encoding::Base64] {
            let bytes = [0u8, 1, 0xfe, 0xff, 0x7f];
            assert_eq!(
                encoding.decode(&encoding.encode(&bytes)),
                Some(bytes.to_vec())
            );
        }
        assert_eq!(Encoding::Hex.decode("abc"), None, "odd length");
        assert_eq!(Encoding::Hex.decode("zz"), None);
        assert_eq!(Encoding::Hex.decode("ABCD"), Some(vec![0xab, 0xcd]));
        assert_eq!(Encoding::Base64.decode("a"), None);
        assert_eq!(Encoding::Base64.decode("!!!!"), None);
    }
}

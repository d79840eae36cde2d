//! Turning the signatures listed in a header into bytes to compare.

use super::header::HeaderSpec;
use super::{Encoding, MAX_SIGNATURES, VerifyError};

/// The decoded signatures among `listed`, each with the tag it was listed with (its version,
/// for schemes that have several).
///
/// A signature that does not decode is skipped like one that does not match, so a header that
/// also lists a valid signature still verifies. Errors, all for `header`:
/// [`VerifyError::TooManySignatures`] beyond [`MAX_SIGNATURES`]; [`VerifyError::NoSignature`]
/// when `listed` is empty; [`VerifyError::EmptySignature`] when every listed signature is empty;
/// [`VerifyError::MalformedHeader`] when none decodes.
pub(crate) fn decode<T: Copy>(
    header: &HeaderSpec,
    encoding: Encoding,
    listed: &[(T, &str)],
) -> Result<Vec<(T, Vec<u8>)>, VerifyError> {
    if listed.len() > MAX_SIGNATURES {
        return Err(VerifyError::TooManySignatures {
            header: header.name.clone(),
            count: listed.len(),
            max: MAX_SIGNATURES,
        });
    }
    if listed.is_empty() {
        return Err(VerifyError::NoSignature {
            header: header.name.clone(),
            expected: header.expected.clone(),
        });
    }
    if listed.iter().all(|(_, text)| text.is_empty()) {
        return Err(VerifyError::EmptySignature {
            header: header.name.clone(),
        });
    }
    let decoded: Vec<_> = listed
        .iter()
        .filter(|(_, text)| !text.is_empty())
        .filter_map(|&(tag, text)| Some((tag, encoding.decode(text)?)))
        .collect();
    if decoded.is_empty() {
        return Err(header.malformed(encoding.invalid()));
    }
    Ok(decoded)
}

/// [`decode`] for schemes with a single signature version.
pub(crate) fn decode_untagged(
    header: &HeaderSpec,
    encoding: Encoding,
    listed: &[&str],
) -> Result<Vec<Vec<u8>>, VerifyError> {
    let tagged: Vec<_> = listed.iter().map(|text| ((), *text)).collect();
    Ok(decode(header, encoding, &tagged)?
        .into_iter()
        .map(|((), bytes)| bytes)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: HeaderSpec = HeaderSpec::new("X-Signature", "<hex>");

    fn hex(listed: &[&str]) -> Result<Vec<Vec<u8>>, VerifyError> {
        decode_untagged(&HEADER, Encoding::Hex, listed)
    }

    #[test]
    fn keeps_what_decodes_and_skips_the_rest() {
        assert_eq!(hex(&["", "zz", "abcd"]), Ok(vec![vec![0xab, 0xcd]]));
    }

    #[test]
    fn names_the_problem_when_nothing_is_usable() {
        assert_eq!(hex(&[]).unwrap_err().reason(), "no_signature");
        assert_eq!(hex(&["", ""]).unwrap_err().reason(), "empty_signature");
        assert_eq!(
            hex(&["abc", ""]).unwrap_err().to_string(),
            "header `X-Signature` is malformed: the signature is not valid hex; expected `<hex>`"
        );
        let many = vec!["ab"; MAX_SIGNATURES + 1];
        assert_eq!(
            hex(&many).unwrap_err().to_string(),
            format!(
                "header `X-Signature` holds {} signatures; at most {MAX_SIGNATURES} are checked",
                MAX_SIGNATURES + 1
            )
        );
        assert!(hex(&vec!["ab"; MAX_SIGNATURES]).is_ok());
    }
}
